/// A route as written in the configuration file, before validation. ``Route/init(_:)`` checks it.
public struct RouteDefinition: Sendable, Equatable, Codable {
    public var name: String?
    public var topic: String?
    public var condition: String?
    public var data: [String: DataValue]?
    public var when: Filter?
    /// Remote Config condition names → the FCM topic of the devices each describes: a change confined to conditional
    /// values of mapped conditions pings only those topics.
    public var audience: [String: String]?
    public var android: Android?
    public var apns: APNs?
    public var webpush: WebPush?
    /// A quiet period: a version's ping waits this long, and a newer version arriving meanwhile replaces it.
    public var debounceSeconds: Int?
    /// Staged waves: the audience split over shard topics, sent evenly across a spread.
    public var waves: WavesDefinition?
    /// An HTTP target instead of an FCM one: a signed call or a chat message describing each version
    /// (``HTTPTarget``, docs/targets.md).
    public var webhook: Webhook?

    /// `webhook`: the receiver's URL, the body's format (`standard`, `slack`, `googleChat`), and a standard target's
    /// signing secrets.
    public struct Webhook: Sendable, Equatable, Codable {
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
    }

    /// `waves`: `shards` topics named by `topic` (which holds `{shard}`), sent evenly across `spreadSeconds`.
    public struct WavesDefinition: Sendable, Equatable, Codable {
        public var shards: Int?
        public var spreadSeconds: Int?
        public var topic: String?
        public init(shards: Int? = nil, spreadSeconds: Int? = nil, topic: String? = nil) {
            (self.shards, self.spreadSeconds, self.topic) = (shards, spreadSeconds, topic)
        }
    }

    /// Only versions matching every listed field are routed; an absent list matches everything.
    public struct Filter: Sendable, Equatable, Codable {
        public var updateTypes: [String]?
        public var origins: [String]?
        /// Only versions that change one of these (the template is fetched and compared with the one before).
        public var changed: Changed?
        public init(updateTypes: [String]? = nil, origins: [String]? = nil, changed: Changed? = nil) {
            self.updateTypes = updateTypes
            self.origins = origins
            self.changed = changed
        }
    }

    /// `when.changed`: parameter names or globs, and condition names.
    public struct Changed: Sendable, Equatable, Codable {
        public var parameters: [String]?
        public var conditions: [String]?
        public init(parameters: [String]? = nil, conditions: [String]? = nil) { (self.parameters, self.conditions) = (parameters, conditions) }
    }

    public struct Android: Sendable, Equatable, Codable {
        public var priority: String?
        public var collapseKey: String?
        public var ttlSeconds: Int?
        public init(priority: String? = nil, collapseKey: String? = nil, ttlSeconds: Int? = nil) {
            self.priority = priority
            self.collapseKey = collapseKey
            self.ttlSeconds = ttlSeconds
        }
    }

    public struct APNs: Sendable, Equatable, Codable {
        public var collapseId: String?
        public init(collapseId: String? = nil) { self.collapseId = collapseId }
    }

    public struct WebPush: Sendable, Equatable, Codable {
        public var ttlSeconds: Int?
        public var urgency: String?
        public init(ttlSeconds: Int? = nil, urgency: String? = nil) {
            self.ttlSeconds = ttlSeconds
            self.urgency = urgency
        }
    }

    public init(
        name: String? = nil, topic: String? = nil, condition: String? = nil, data: [String: String]? = nil,
        when: Filter? = nil, audience: [String: String]? = nil, android: Android? = nil, apns: APNs? = nil, webpush: WebPush? = nil,
        debounceSeconds: Int? = nil, waves: WavesDefinition? = nil, webhook: Webhook? = nil
    ) {
        self.webhook = webhook
        self.debounceSeconds = debounceSeconds
        self.waves = waves
        self.audience = audience
        self.name = name
        self.topic = topic
        self.condition = condition
        self.data = data?.mapValues(DataValue.string)
        self.when = when
        self.android = android
        self.apns = apns
        self.webpush = webpush
    }

    /// The route used when the configuration lists none: the documented Cloud Function, plus the version.
    public static let `default` = RouteDefinition(
        name: "default", topic: "PUSH_RC", data: ["CONFIG_STATE": "STALE", "CONFIG_VERSION": "{{version}}"])
}

/// A `data` value as written: FCM data values are strings, so anything else is kept to be refused clearly.
public enum DataValue: Sendable, Equatable, Codable {
    case string(String)
    case notString(String)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .notString("null")
        } else if let value = try? c.decode(Bool.self) {
            self = .notString(String(value))
        } else if let value = try? c.decode(Int.self) {
            self = .notString(String(value))
        } else if let value = try? c.decode(Double.self) {
            self = .notString(String(value))
        } else if let value = try? c.decode(String.self) {
            self = .string(value)
        } else {
            self = .notString("a list or map")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let value), .notString(let value): try c.encode(value)
        }
    }
}
