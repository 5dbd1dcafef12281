import Crypto
import Foundation

/// Verifies Standard Webhooks signatures: HMAC-SHA256 over `id.timestamp.body`, several secrets for rotation.
public struct StandardWebhookVerifier: Sendable {
    /// The accepted secrets; any one of them may have signed.
    public let secrets: [WebhookSecret]
    /// How far the timestamp may be from now, either way (the reference libraries use 5 minutes).
    public let tolerance: Duration

    public init(secrets: [WebhookSecret], tolerance: Duration = .seconds(300)) {
        self.secrets = secrets
        self.tolerance = tolerance
    }

    /// The three signature headers of one request.
    public struct Headers: Sendable {
        public var id: String?
        public var timestamp: String?
        public var signature: String?
        public init(id: String?, timestamp: String?, signature: String?) {
            self.id = id
            self.timestamp = timestamp
            self.signature = signature
        }
    }

    /// Checks the headers against the raw body as received; returns normally only when one signature matches.
    public func verify(_ headers: Headers, body: Data, now: Date = Date()) throws(VerificationError) {
        guard let id = headers.id, !id.isEmpty else { throw .missingHeader("webhook-id") }
        guard let timestampText = headers.timestamp else { throw .missingHeader("webhook-timestamp") }
        guard let signatureHeader = headers.signature, !signatureHeader.isEmpty else {
            throw .missingHeader("webhook-signature")
        }
        guard let timestamp = Int64(timestampText) else { throw .invalidTimestamp }
        let skew = Double(timestamp) - now.timeIntervalSince1970
        let limit = Double(tolerance.components.seconds)
        if skew < -limit { throw .timestampTooOld }
        if skew > limit { throw .timestampInFuture }

        let provided = signatureHeader.split(separator: " ").compactMap { entry -> Data? in
            let parts = entry.split(separator: ",", maxSplits: 1)
            guard parts.count == 2, parts[0] == "v1" else { return nil }  // v1a (ed25519) and others: not ours
            return Data(base64Encoded: String(parts[1]))
        }
        guard !provided.isEmpty else { throw .signatureMismatch }
        var content = Data("\(id).\(timestampText).".utf8)
        content.append(body)
        // `isValidAuthenticationCode` compares in constant time.
        for secret in secrets {
            for candidate in provided
            where HMAC<SHA256>.isValidAuthenticationCode(candidate, authenticating: content, using: secret.key) {
                return
            }
        }
        throw .signatureMismatch
    }

    /// Signs a body the way a Standard Webhooks sender does (used by the development profile and tests).
    public static func sign(id: String, timestamp: Int64, body: Data, secret: WebhookSecret) -> String {
        var content = Data("\(id).\(timestamp).".utf8)
        content.append(body)
        let code = HMAC<SHA256>.authenticationCode(for: content, using: secret.key)
        return "v1," + Data(code).base64EncodedString()
    }
}
