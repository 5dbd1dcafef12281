import Foundation

/// A route's HTTP target (`webhook:`), validated: where a version's call goes, its body's format, and for the
/// `standard` format the secrets that sign it. The URL is a secret too (Slack's and Google Chat's carry their key), so
/// nothing here prints it: errors, logs and the admin API name the route and the URL's host only.
public struct HTTPTarget: Sendable {
    /// What the body is: a Standard Webhooks event, a Slack incoming-webhook message, or a Google Chat message.
    public enum Format: String, Sendable, CaseIterable, Codable {
        case standard, slack, googleChat

        /// The service its requests are counted and logged as (``PingPayload``'s sender).
        public var service: String {
            switch self {
            case .standard: "webhook"
            case .slack: "Slack"
            case .googleChat: "Google Chat"
            }
        }
    }

    public let url: URL
    /// The URL's host, as logs, metrics and the pace name the destination.
    public let host: String
    public let format: Format
    /// The first signs; every one signs (rotation: a receiver that knows any of them verifies).
    public let secrets: [WebhookSecret]
    /// A PEM file of certificates the receiver's may chain to, trusted beside the system's roots.
    public let caFile: String?
    public let timeout: Duration
    /// Requests a second to the URL's host, on average.
    public let messagesPerSecond: Double

    static let maximumURLLength = 2048
    static let maximumSecrets = 10
    static let maximumTimeoutSeconds = 60
    public static let defaultTimeoutSeconds = 10

    /// Slack's and Google Chat's incoming webhooks take about one message a second; a receiver of signed calls more.
    public static func defaultMessagesPerSecond(_ format: Format) -> Double { format == .standard ? 10 : 1 }

    /// Validates `webhook:`; errors never show the URL, only its scheme and host.
    public init(_ definition: RouteDefinition.Webhook) throws(RouteError) {
        guard let source = definition.url else {
            throw RouteError(key: "webhook.url", problem: "it is missing", fix: "give the receiver's https:// URL")
        }
        guard let text = source.value, !text.isEmpty else {
            throw RouteError(key: "webhook.url", problem: "it is empty or was not read", fix: "give the receiver's https:// URL")
        }
        guard text.utf8.count <= Self.maximumURLLength, let components = URLComponents(string: text), let url = components.url,
            let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty
        else {
            throw RouteError(key: "webhook.url", problem: "it is not an absolute URL with a host", fix: "write it as https://host/path")
        }
        let loopback = ["localhost", "127.0.0.1", "::1", "[::1]"].contains(host.lowercased())
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw RouteError(
                key: "webhook.url", problem: "its scheme is \(scheme.prefix(16)) (host \(host.prefix(100)))",
                fix: "use https://; plain http:// is for a receiver on this machine (localhost, 127.0.0.1, [::1]) only")
        }
        guard components.user == nil, components.password == nil else {
            throw RouteError(
                key: "webhook.url", problem: "it holds a user or password (host \(host.prefix(100)))",
                fix: "drop them; a standard receiver verifies the signature instead")
        }
        let format: Format
        if let name = definition.format {
            guard let known = Format(rawValue: name) else {
                throw RouteError(
                    key: "webhook.format", problem: "'\(name.prefix(100))' is not a format",
                    fix: "use standard (signed, Standard Webhooks), slack or googleChat")
            }
            format = known
        } else {
            format = .standard
        }
        let secrets = definition.secrets ?? []
        switch format {
        case .standard:
            guard (1...Self.maximumSecrets).contains(secrets.count) else {
                throw RouteError(
                    key: "webhook.secrets",
                    problem: secrets.isEmpty ? "a standard target signs its calls, and none is given" : "it lists \(secrets.count)",
                    fix: "give 1 to \(Self.maximumSecrets) whsec_… secrets (rc-relay secret makes one); during a rotation list the new one first")
            }
        case .slack, .googleChat:
            guard secrets.isEmpty else {
                throw RouteError(
                    key: "webhook.secrets", problem: "\(format.rawValue) signs nothing: its URL is its secret",
                    fix: "drop secrets, and keep the URL as secret as a key")
            }
        }
        var parsed: [WebhookSecret] = []
        for (index, secret) in secrets.enumerated() {
            do {
                parsed.append(try WebhookSecret(secret.value ?? ""))
            } catch {
                throw RouteError(
                    key: "webhook.secrets[\(index)]", problem: "it is not a whsec_ secret of at least 16 bytes of base64",
                    fix: "make one with rc-relay secret")
            }
        }
        let timeout = definition.timeoutSeconds ?? Self.defaultTimeoutSeconds
        guard (1...Self.maximumTimeoutSeconds).contains(timeout) else {
            throw RouteError(
                key: "webhook.timeoutSeconds", problem: "\(timeout) is outside 1 to \(Self.maximumTimeoutSeconds) seconds",
                fix: "use a few seconds, such as 10")
        }
        let rate = definition.messagesPerSecond ?? Self.defaultMessagesPerSecond(format)
        guard rate.isFinite, rate >= 1, rate <= 1000 else {
            throw RouteError(key: "webhook.messagesPerSecond", problem: "\(rate) is outside 1 to 1000", fix: "use 1 for chat, 10 for a service")
        }
        if let caFile = definition.caFile, caFile.isEmpty {
            throw RouteError(key: "webhook.caFile", problem: "it is empty", fix: "give a PEM file's path, or drop it to use the system's roots")
        }
        (self.url, self.host, self.format, self.secrets) = (url, host, format, parsed)
        (self.caFile, self.timeout, self.messagesPerSecond) = (definition.caFile, .seconds(timeout), rate)
    }
}
