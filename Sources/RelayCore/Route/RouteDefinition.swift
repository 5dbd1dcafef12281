/// A route as written in the configuration file, before validation. ``Route/init(_:)`` checks it.
public struct RouteDefinition: Sendable {
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
    /// Another kind of target instead of an FCM one (``TargetKind``: an HTTP target's `webhook:`), each under its
    /// kind's key; a valid route has at most one.
    public var targets: [any TargetDefinition] = []

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
        debounceSeconds: Int? = nil, waves: WavesDefinition? = nil
    ) {
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

extension RouteDefinition: Equatable, Codable {
    /// The target kinds a decoder reads (`[any TargetKind]` in its `userInfo`): a route's key that is one's is read as
    /// its definition. Without them, no route has another target.
    public static let targetKinds = CodingUserInfoKey(rawValue: "rc-relay.targetKinds")!

    private enum CodingKeys: String, CodingKey {
        case name, topic, condition, data, when, audience, android, apns, webpush, debounceSeconds, waves
    }

    private struct TargetKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.name = try c.decodeIfPresent(String.self, forKey: .name)
        self.topic = try c.decodeIfPresent(String.self, forKey: .topic)
        self.condition = try c.decodeIfPresent(String.self, forKey: .condition)
        self.data = try c.decodeIfPresent([String: DataValue].self, forKey: .data)
        self.when = try c.decodeIfPresent(Filter.self, forKey: .when)
        self.audience = try c.decodeIfPresent([String: String].self, forKey: .audience)
        self.android = try c.decodeIfPresent(Android.self, forKey: .android)
        self.apns = try c.decodeIfPresent(APNs.self, forKey: .apns)
        self.webpush = try c.decodeIfPresent(WebPush.self, forKey: .webpush)
        self.debounceSeconds = try c.decodeIfPresent(Int.self, forKey: .debounceSeconds)
        self.waves = try c.decodeIfPresent(WavesDefinition.self, forKey: .waves)
        let kinds = decoder.userInfo[Self.targetKinds] as? [any TargetKind] ?? []
        let others = try decoder.container(keyedBy: TargetKey.self)
        self.targets = try kinds.compactMap { kind in
            let key = TargetKey(stringValue: kind.key)
            guard others.contains(key), try !others.decodeNil(forKey: key) else { return nil }
            return try kind.definition(from: others.superDecoder(forKey: key))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(topic, forKey: .topic)
        try c.encodeIfPresent(condition, forKey: .condition)
        try c.encodeIfPresent(data, forKey: .data)
        try c.encodeIfPresent(when, forKey: .when)
        try c.encodeIfPresent(audience, forKey: .audience)
        try c.encodeIfPresent(android, forKey: .android)
        try c.encodeIfPresent(apns, forKey: .apns)
        try c.encodeIfPresent(webpush, forKey: .webpush)
        try c.encodeIfPresent(debounceSeconds, forKey: .debounceSeconds)
        try c.encodeIfPresent(waves, forKey: .waves)
        var others = encoder.container(keyedBy: TargetKey.self)
        for target in targets { try target.encode(to: others.superEncoder(forKey: TargetKey(stringValue: target.key))) }
    }

    public static func == (lhs: RouteDefinition, rhs: RouteDefinition) -> Bool {
        (lhs.name, lhs.topic, lhs.condition, lhs.data, lhs.when, lhs.audience) == (
            rhs.name, rhs.topic, rhs.condition, rhs.data, rhs.when, rhs.audience
        )
            && (lhs.android, lhs.apns, lhs.webpush, lhs.debounceSeconds, lhs.waves) == (
                rhs.android, rhs.apns, rhs.webpush, rhs.debounceSeconds, rhs.waves
            )
            && lhs.targets.count == rhs.targets.count && zip(lhs.targets, rhs.targets).allSatisfy { $0.isEqual(to: $1) }
    }

    /// The first key the route sets that describes an FCM message, which a route with another target cannot set.
    var fcmKey: String? {
        let set: [(String, Bool)] = [
            ("topic", topic != nil), ("condition", condition != nil), ("data", data != nil), ("audience", audience != nil),
            ("android", android != nil), ("apns", apns != nil), ("webpush", webpush != nil), ("waves", waves != nil),
        ]
        return set.first { $0.1 }?.0
    }
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
