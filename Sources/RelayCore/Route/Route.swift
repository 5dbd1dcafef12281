/// A validated route: which template versions it takes, and the FCM ping or its other target's message
/// (``RouteTarget``) it makes of them.
public struct Route: Sendable {
    public let name: String
    /// An FCM route's topic or condition. A route with another target (``destination``) sends to no FCM audience: this
    /// is then the topic named after the route, never sent to.
    public let target: FCMMessage.Target
    /// The route's target of another kind (an HTTP target), instead of an FCM message.
    public let destination: (any RouteTarget)?
    public let data: [(key: String, value: DataTemplate)]
    public let updateTypes: Set<String>?
    public let origins: Set<String>?
    /// `when.changed`: the changes the route is for; nil: every change.
    public let changeRule: ChangeRule?
    /// `audience`: Remote Config condition name → FCM topic.
    public let audience: [String: String]
    public let android: FCMMessage.Android
    public let apns: FCMMessage.APNs
    public let webpush: FCMMessage.WebPush
    /// `debounceSeconds`: how long a version's ping waits for a newer one (zero: it goes at once).
    public let quiet: Duration
    /// `waves`: the shard topics its whole audience is sent to, one after another.
    public let waves: Waves?
    /// The route as written, for the admin API.
    public let definition: RouteDefinition

    /// FCM's data limit for topic and condition messages, in UTF-8 bytes of keys and values.
    public static let topicDataLimit = 2048
    public static let knownUpdateTypes: Set<String> = [
        "REMOTE_CONFIG_UPDATE_TYPE_UNSPECIFIED", "INCREMENTAL_UPDATE", "FORCED_UPDATE", "ROLLBACK",
    ]
    public static let knownOrigins: Set<String> = [
        "REMOTE_CONFIG_UPDATE_ORIGIN_UNSPECIFIED", "CONSOLE", "REST_API", "ADMIN_SDK_NODE",
    ]

    /// Validates a definition against FCM's rules; every error names the key within the route.
    public init(_ definition: RouteDefinition, index: Int) throws(RouteError) {
        self.name = definition.name ?? "route-\(index)"
        if name.isEmpty || name.contains("#") || name.contains("@") {
            throw RouteError(key: "name", problem: "'\(name.prefix(100))' is empty or holds '#' or '@'", fix: "use letters, digits, - and _")
        }
        self.definition = definition
        if let other = definition.targets.first {
            if let second = definition.targets.dropFirst().first {
                throw RouteError(
                    key: second.key, problem: "the route has a \(other.key) target already", fix: "make a route of its own for each target")
            }
            if let key = definition.fcmKey {
                throw RouteError(
                    key: key, problem: "the route has a \(other.key) target, and \(key) describes an FCM message",
                    fix: "drop \(key), or make a route of its own for the FCM ping")
            }
            self.destination = try other.target(route: name)
            self.waves = nil
            self.target = .topic(name)
        } else {
            self.destination = nil
            let waves = try Self.waves(definition)
            self.waves = waves
            if let waves { self.target = .topic(waves.topic(shard: 0)) } else { self.target = try Self.target(definition) }
        }
        self.quiet = .seconds(try Self.debounce(definition.debounceSeconds))
        self.data = try Self.data(definition.data ?? [:])
        self.updateTypes = try Self.filter(definition.when?.updateTypes, key: "when.updateTypes", known: Self.knownUpdateTypes)
        self.origins = try Self.filter(definition.when?.origins, key: "when.origins", known: Self.knownOrigins)
        self.changeRule = try Self.changeRule(definition.when?.changed)
        self.audience = try Self.audience(definition.audience)
        self.android = try Self.android(definition.android)
        self.apns = try Self.apns(definition.apns)
        self.webpush = try Self.webpush(definition.webpush)
        let size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.maximumByteCount }
        if size > Self.topicDataLimit {
            throw RouteError(
                key: "data",
                problem: "the data can reach \(size) bytes, over FCM's \(Self.topicDataLimit)-byte limit for topic messages",
                fix: "shorten keys or values, or drop large placeholders such as {{description}} (256 bytes)")
        }
    }

    /// Whether this route takes the version.
    public func matches(_ version: TemplateVersion) -> Bool {
        if let updateTypes, !updateTypes.contains(version.updateType ?? "") { return false }
        if let origins, !origins.contains(version.updateOrigin ?? "") { return false }
        return true
    }

    /// The pings of one message to the route's whole audience: one, or one per shard of its waves (named `name@0`, …).
    public func pings(of message: FCMMessage, project: String, decision: String? = nil) -> [Ping] {
        guard let waves else {
            return [Ping(route: name, project: project, message: message, decision: decision, schedule: PingSchedule(quiet: quiet))]
        }
        return (0..<waves.shards).map { shard in
            var message = message
            message.target = .topic(waves.topic(shard: shard))
            let schedule = PingSchedule(quiet: quiet, shard: .init(index: shard, count: waves.shards, spacing: waves.spacing))
            return Ping(route: "\(name)@\(shard)", project: project, message: message, decision: decision, schedule: schedule)
        }
    }

    /// The message its other target sends for a version; nil for an FCM route.
    public func targetMessage(for version: TemplateVersion, project: String, change: TemplateChange, audiences: [String]) -> (any TargetMessage)? {
        destination?.message(for: version, project: project, route: name, change: change, audiences: audiences)
    }

    /// Whether a data value uses `{{changedParameters}}`, so the route needs to know what a version changed.
    public var rendersChanges: Bool { data.contains { $0.value.uses(.changedParameters) } }

    /// The FCM message for one version, sent to the route's target or, when given, to one device token.
    /// `changedParameters`: what the version changed, for `{{changedParameters}}` (nil: unknown, rendered `*`).
    public func message(for version: TemplateVersion, project: String, token: String? = nil, changedParameters: [String]? = nil)
        -> FCMMessage
    {
        var rendered: [String: String] = [:]
        for (key, template) in data { rendered[key] = template.render(version, project: project, changedParameters: changedParameters) }
        return FCMMessage(
            target: token.map(FCMMessage.Target.token) ?? target, data: rendered, android: android, apns: apns,
            webpush: webpush)
    }
}
