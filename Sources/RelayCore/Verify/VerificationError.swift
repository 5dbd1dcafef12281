/// Why a request's Standard Webhooks signature was not accepted.
public enum VerificationError: Error, Equatable, Sendable {
    /// One of `webhook-id`, `webhook-timestamp`, `webhook-signature` is absent.
    case missingHeader(String)
    /// `webhook-timestamp` is not a Unix time in seconds.
    case invalidTimestamp
    /// The timestamp is older than the tolerance allows.
    case timestampTooOld
    /// The timestamp is further in the future than the tolerance allows.
    case timestampInFuture
    /// No `v1` entry matched any configured secret.
    case signatureMismatch
    /// `webhook-signature` has more entries than ``StandardWebhookVerifier/maximumEntries``.
    case tooManySignatures
    /// A configured secret is not `whsec_` + base64 of at least 16 bytes.
    case invalidSecret
}

extension VerificationError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .missingHeader(let name): "the \(name) header is missing"
        case .invalidTimestamp: "webhook-timestamp is not a Unix time in seconds"
        case .timestampTooOld: "webhook-timestamp is older than the allowed tolerance"
        case .timestampInFuture: "webhook-timestamp is further in the future than the allowed tolerance"
        case .signatureMismatch: "no v1 signature matches a configured secret"
        case .tooManySignatures: "webhook-signature has more than \(StandardWebhookVerifier.maximumEntries) entries"
        case .invalidSecret: "the secret is not whsec_ followed by base64 of at least 16 bytes"
        }
    }
}
