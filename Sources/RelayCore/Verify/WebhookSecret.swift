import Crypto
import Foundation

/// A Standard Webhooks signing secret (`whsec_` + base64). Its description never shows the key.
public struct WebhookSecret: Sendable, CustomStringConvertible {
    let key: SymmetricKey
    /// The MAC keyed once: keying pads the key and hashes its two blocks, work every webhook would otherwise repeat.
    /// A copy is updated per webhook (its digest state is copy-on-write).
    let keyed: HMAC<SHA256>

    /// Parses `whsec_<base64>`; the prefix is optional, as in the reference libraries.
    public init(_ text: String) throws(VerificationError) {
        let encoded = text.hasPrefix("whsec_") ? String(text.dropFirst("whsec_".count)) : text
        guard let bytes = Data(base64Encoded: encoded), bytes.count >= 16 else { throw .invalidSecret }
        self.key = SymmetricKey(data: bytes)
        self.keyed = HMAC<SHA256>(key: key)
    }

    /// A new random 32-byte secret, as `whsec_…` text.
    public static func generate() -> String {
        "whsec_" + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    public var description: String { "whsec_<redacted>" }
}
