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

    /// What the headers alone prove: present, within the tolerance, with signatures that can be checked. Checked before
    /// the body is read, so a caller whose headers cannot pass never uploads one.
    public struct CheckedHeaders: Sendable {
        public let id: String
        public let timestamp: String
        let candidates: [Data]
    }

    /// Checks the headers against the raw body as received; returns normally only when one signature matches.
    public func verify(_ headers: Headers, body: Data, now: Date = Date()) throws(VerificationError) {
        try verify(try check(headers, now: now), body: body)
    }

    /// Everything the headers alone can fail: missing, a timestamp out of the tolerance, too many entries, no entry
    /// that can be an HMAC-SHA256.
    public func check(_ headers: Headers, now: Date = Date()) throws(VerificationError) -> CheckedHeaders {
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
        let provided = try Self.candidates(in: signatureHeader)
        guard !provided.isEmpty else { throw .signatureMismatch }
        return CheckedHeaders(id: id, timestamp: timestampText, candidates: provided)
    }

    /// Checks the body against headers that passed ``check(_:now:)``.
    public func verify(_ headers: CheckedHeaders, body: Data) throws(VerificationError) {
        let prefix = Data("\(headers.id).\(headers.timestamp).".utf8)
        // One MAC per secret, whatever the caller sends: the cost of a refusal is bounded by the configuration, not by
        // the number of entries. `==` on a MAC compares in constant time.
        for secret in secrets {
            var mac = secret.keyed
            mac.update(data: prefix)
            mac.update(data: body)
            let expected = mac.finalize()
            if headers.candidates.contains(where: { expected == $0 }) { return }
        }
        throw .signatureMismatch
    }

    /// At most this many space-separated entries in `webhook-signature` (a sender rotating secrets sends two or three).
    public static let maximumEntries = 16

    /// The `v1` entries that can be an HMAC-SHA256 (32 bytes, 44 characters of base64); other versions (`v1a`) and
    /// anything that cannot be a SHA-256 MAC are skipped. More than ``maximumEntries`` entries is refused outright.
    ///
    /// The header is read entry by entry and no further than the entry over the limit: splitting it whole first made a
    /// header of 1,000 entries cost a third of the relay's CPU under a flood of them (docs/performance.md).
    public static func candidates(in header: String) throws(VerificationError) -> [Data] {
        var found: [Data] = []
        var entries = 0
        let bytes = header.utf8
        let space = UInt8(ascii: " ")
        var start = bytes.startIndex
        while start < bytes.endIndex {
            guard bytes[start] != space else {
                start = bytes.index(after: start)
                continue
            }
            let end = bytes[start...].firstIndex(of: space) ?? bytes.endIndex
            let entry = bytes[start..<end]
            start = end
            entries += 1
            guard entries <= maximumEntries else { throw .tooManySignatures }
            guard entry.count == 47, entry.starts(with: "v1,".utf8),
                let mac = Data(base64Encoded: Data(entry.dropFirst(3))), mac.count == 32
            else { continue }
            found.append(mac)
        }
        return found
    }

    /// Signs a body the way a Standard Webhooks sender does (used by the development profile and tests).
    public static func sign(id: String, timestamp: Int64, body: Data, secret: WebhookSecret) -> String {
        var content = Data("\(id).\(timestamp).".utf8)
        content.append(body)
        let code = HMAC<SHA256>.authenticationCode(for: content, using: secret.key)
        return "v1," + Data(code).base64EncodedString()
    }
}
