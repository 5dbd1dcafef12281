/// HTTP targets as a kind of target (``TargetKind``): a route's `webhook:` key, read into ``RouteDefinition/Webhook``,
/// validated into an ``HTTPTarget``, which makes each version's ``HTTPCall`` (docs/targets.md).
public struct HTTPTargetKind: TargetKind {
    public init() {}

    /// The route's key, and the kind its targets, calls and audiences (`webhook:<route>`) are named by.
    static let name = "webhook"

    public var key: String { Self.name }

    public var knownKeys: [String: Set<String>] {
        [
            "": ["url", "format", "secrets", "caFile", "timeoutSeconds", "messagesPerSecond"],
            "url": ["value", "env", "file"], "secrets[]": ["value", "env", "file"],
        ]
    }

    public func definition(from decoder: any Decoder) throws -> any TargetDefinition { try RouteDefinition.Webhook(from: decoder) }
}

extension RouteDefinition {
    /// `webhook`: the receiver's URL, the body's format (`standard`, `slack`, `googleChat`), and a standard target's
    /// signing secrets.
    public struct Webhook: Sendable, Equatable, Codable, TargetDefinition {
        public var url: SecretSource?
        public var format: String?
        public var secrets: [SecretSource]?
        public var caFile: String?
        public var timeoutSeconds: Int?
        public var messagesPerSecond: Double?

        public init(
            url: SecretSource? = nil, format: String? = nil, secrets: [SecretSource]? = nil, caFile: String? = nil, timeoutSeconds: Int? = nil,
            messagesPerSecond: Double? = nil
        ) {
            (self.url, self.format, self.secrets, self.caFile) = (url, format, secrets, caFile)
            (self.timeoutSeconds, self.messagesPerSecond) = (timeoutSeconds, messagesPerSecond)
        }

        public var key: String { HTTPTargetKind.name }

        /// The URL and each signing secret read; one that could not be read is left empty (its problem is noted).
        public func readingSecrets(_ read: (SecretSource, String) -> String?) -> any TargetDefinition {
            var definition = self
            definition.url = url.map { .value(read($0, "webhook.url") ?? "") }
            definition.secrets = secrets?.enumerated().map { index, source in .value(read(source, "webhook.secrets[\(index)]") ?? "") }
            return definition
        }

        public func target(route: String) throws(RouteError) -> any RouteTarget { try HTTPTarget(self) }
    }

    /// A route with an HTTP target, as tests and the development profile write one.
    public init(
        name: String? = nil, topic: String? = nil, condition: String? = nil, data: [String: String]? = nil,
        when: Filter? = nil, audience: [String: String]? = nil, waves: WavesDefinition? = nil, debounceSeconds: Int? = nil,
        webhook: Webhook
    ) {
        self.init(
            name: name, topic: topic, condition: condition, data: data, when: when, audience: audience, debounceSeconds: debounceSeconds, waves: waves
        )
        self.targets = [webhook]
    }

}

extension HTTPTarget: RouteTarget {
    public var kind: String { HTTPTargetKind.name }
    public var summary: String { "\(format.rawValue) HTTP target at \(host)" }
    public var shownURL: String { "\(url.scheme ?? "https")://\(host)/…" }
    public var service: String { format.service }

    public func message(for version: TemplateVersion, project: String, route: String, change: TemplateChange, audiences: [String])
        -> any TargetMessage
    {
        let notice = PublishNotice(version: version, project: project, change: change, audiences: audiences, route: route)
        return HTTPCall(route: route, format: format, id: HTTPCall.id(project: project, version: version.versionNumber, route: route), notice: notice)
    }
}

extension HTTPCall: TargetMessage {
    public var kind: String { HTTPTargetKind.name }
    public var preview: any Encodable & Sendable { notice.message(format) }
}

extension Route {
    /// The route's HTTP target, if it has one.
    public var webhook: HTTPTarget? { destination as? HTTPTarget }
}
