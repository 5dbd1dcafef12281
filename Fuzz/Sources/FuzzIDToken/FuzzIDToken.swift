import Foundation
import RelayServer

/// A Google-signed ID token's unverified parts: the input's first byte chooses the header (the token's shape,
/// algorithm and key id, read before any signature is checked) or the claims (issuer, audience, times, email: read
/// once jwt-kit has verified the signature, here decoded straight from the input). Either must return or throw an
/// `OIDCError`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    guard count > 0 else { return 0 }
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let rest = Data(bytes.dropFirst())
    if bytes[0] % 2 == 0 {
        _ = try? IDTokenInspection.keyID(of: String(decoding: rest, as: UTF8.self))
    } else {
        _ = try? IDTokenInspection.check(
            claims: rest, audiences: ["https://relay.example.com/webhooks/remote-config"],
            allowedEmails: ["eventarc-invoker@demo-project.iam.gserviceaccount.com"], clockSkew: 60,
            now: Date(timeIntervalSince1970: 1_800_000_000))
    }
    return 0
}
