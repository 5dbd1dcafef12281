/// The `message` object of an FCM HTTP v1 `messages:send` request, encoded as firebase-admin does (snake case).
public struct FCMMessage: Sendable, Equatable, Encodable {
    /// Exactly one target, as FCM requires.
    public enum Target: Sendable, Equatable, Codable {
        case topic(String)
        case condition(String)
        case token(String)

        /// The topic or the condition, as logs and traces name an audience; nil for a device, whose registration
        /// token is personal data and stays out of both.
        public var named: String? {
            switch self {
            case .topic(let topic): topic
            case .condition(let condition): condition
            case .token: nil
            }
        }

        /// The target as one string, distinct per audience.
        public var key: String {
            switch self {
            case .topic(let topic): "topic:\(topic)"
            case .condition(let condition): "condition:\(condition)"
            case .token(let token): "token:\(token)"
            }
        }
    }

    public var target: Target
    public var data: [String: String]
    public var android: Android
    public var apns: APNs
    public var webpush: WebPush

    public struct Android: Sendable, Equatable, Encodable {
        public var priority: String
        public var collapse_key: String
        public var ttl: String
    }

    public struct APNs: Sendable, Equatable, Encodable {
        public var headers: [String: String]
        public var payload: Payload

        public struct Payload: Sendable, Equatable, Encodable {
            public var aps: APS
        }

        /// A silent push carries `content-available: 1` and nothing else.
        public struct APS: Sendable, Equatable, Encodable {
            public var contentAvailable = 1
            enum CodingKeys: String, CodingKey { case contentAvailable = "content-available" }
        }
    }

    public struct WebPush: Sendable, Equatable, Encodable {
        public var headers: [String: String]
    }

    private enum CodingKeys: String, CodingKey { case topic, condition, token, data, android, apns, webpush }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch target {
        case .topic(let topic): try c.encode(topic, forKey: .topic)
        case .condition(let condition): try c.encode(condition, forKey: .condition)
        case .token(let token): try c.encode(token, forKey: .token)
        }
        try c.encode(data, forKey: .data)
        try c.encode(android, forKey: .android)
        try c.encode(apns, forKey: .apns)
        try c.encode(webpush, forKey: .webpush)
    }
}
