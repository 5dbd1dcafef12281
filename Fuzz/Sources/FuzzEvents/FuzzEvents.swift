import Foundation
import RelayCore

/// Every way an event comes in, chosen by the first byte: a bare version, a binary CloudEvent (attributes from the
/// input's first lines, or fixed valid ones), a structured CloudEvent, and a Pub/Sub push envelope. Decoding must
/// return or throw a `DecodeError`; anything else (a trap, a hang, a leak) is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let mode = bytes[0] % 5
    let body = Data(bytes.dropFirst())
    let valid = EventHeaders(
        contentType: "application/json", id: "ev-1", source: "//firebaseremoteconfig.googleapis.com/projects/demo-project",
        specVersion: "1.0", type: "google.firebase.remoteconfig.remoteConfig.v1.updated")
    switch mode {
    case 0:
        _ = try? EventDecoder.decode(body: body, headers: EventHeaders(contentType: "application/json"))
    case 1:
        _ = try? EventDecoder.decode(body: body, headers: valid)
    case 2:
        _ = try? EventDecoder.decode(body: body, headers: EventHeaders(contentType: "application/cloudevents+json; charset=utf-8"))
    case 3:
        _ = try? PubSubDecoder.decode(body: body, contentType: "application/json")
    default:
        // Attributes as a caller sends them: five lines (content type, id, source, spec version, type), then the body.
        let lines = body.split(separator: UInt8(ascii: "\n"), maxSplits: 5, omittingEmptySubsequences: false)
        let field = { (index: Int) -> String? in index < lines.count ? String(decoding: lines[index], as: UTF8.self) : nil }
        let headers = EventHeaders(contentType: field(0), id: field(1), source: field(2), specVersion: field(3), type: field(4))
        _ = try? EventDecoder.decode(body: lines.count > 5 ? Data(lines[5]) : Data(), headers: headers)
    }
    return 0
}
