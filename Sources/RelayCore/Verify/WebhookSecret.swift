import Crypto
import Foundation

/// A Standard Webhooks signing secret (`whsec_` + base64). Its description never shows the key.
public struct WebhookSecret: Sendable, CustomStringConvertible {
    let key: SymmetricKey

    /// Parses `whsec_<base64>`; the prefix is optional, as in the reference libraries.
    public init(_ text: String) throws(VerificationError) {
        let encoded = text.hasPrefix("whsec_") ? String(text.dropFirst("whsec_".count)) : text
        guard let bytes = Data(base64Encoded: encoded), bytes.count >= 16 else { throw .invalidSecret }
        self.key = SymmetricKey(data: bytes)
    }

    /// A new random 32-byte secret, as `whsec_…` text.
    public static func generate() -> String {
        "whsec_" + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }

    public var description: String { "whsec_<redacted>" }
}
