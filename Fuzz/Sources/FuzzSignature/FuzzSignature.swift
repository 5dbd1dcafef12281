import Foundation
import RelayCore

/// Two secrets, as during a rotation: the shared test vector's, and another.
private let verifier = StandardWebhookVerifier(secrets: [
    try! WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), try! WebhookSecret(WebhookSecret.generate()),
])

/// The three Standard Webhooks headers and the body, as a caller sends them: the input's first three lines are
/// `webhook-id`, `webhook-timestamp` and `webhook-signature`, the rest is the body. Verification must return or throw a
/// `VerificationError`, at a cost bounded by the secrets, whatever the header holds.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(UnsafeRawBufferPointer(start: start, count: count))
    let parts = data.split(separator: UInt8(ascii: "\n"), maxSplits: 3, omittingEmptySubsequences: false)
    let field = { (index: Int) -> String? in index < parts.count ? String(decoding: parts[index], as: UTF8.self) : nil }
    let headers = StandardWebhookVerifier.Headers(id: field(0), timestamp: field(1), signature: field(2))
    let body = parts.count > 3 ? Data(parts[3]) : Data()
    _ = try? StandardWebhookVerifier.candidates(in: field(2) ?? "")
    // At the vector's time, so a timestamp from the corpus can pass the window and the signature is really checked.
    try? verifier.verify(headers, body: body, now: Date(timeIntervalSince1970: 1_614_265_330))
    return 0
}
