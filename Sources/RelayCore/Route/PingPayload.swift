/// Who a ping reaches, as the delivery engine keys, logs and keeps it, whatever its target: a named audience (an FCM
/// topic or condition), or one device, whose name (a registration token) is personal data and stays out of logs,
/// traces and the history.
public struct PingAudience: Sendable, Hashable {
    /// What kind of audience its target names, such as `topic` or `condition`.
    public var kind: String
    public var name: String
    public var isDevice: Bool

    public init(kind: String, name: String, isDevice: Bool = false) { (self.kind, self.name, self.isDevice) = (kind, name, isDevice) }

    /// The audience as one string, distinct per audience (`topic:PUSH_RC`).
    public var key: String { "\(kind):\(name)" }

    /// As logs and traces name it; nil for a device.
    public var named: String? { isDevice ? nil : name }
}

/// Kept in the delivery history's JSON as `{"<kind>": {"_0": "<name>"}}`, the shape Swift gave FCM's target before the
/// engine stopped naming it: histories written before read the same.
extension PingAudience: Codable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private enum Value: String, CodingKey { case name = "_0" }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        guard container.allKeys.count == 1, let kind = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "an audience has one kind"))
        }
        let name = try container.nestedContainer(keyedBy: Value.self, forKey: kind).decode(String.self, forKey: .name)
        self.init(kind: kind.stringValue, name: name, isDevice: kind.stringValue == "token")
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        var value = container.nestedContainer(keyedBy: Value.self, forKey: Key(stringValue: kind))
        try value.encode(name, forKey: .name)
    }
}

/// What a ping carries, which its target's sender sends: an FCM message, or a message of a route's other target
/// (``TargetMessage``: an HTTP target's call). The engine reads only ``sender``, ``loggable`` and ``audience``; the
/// sender it picks by ``sender`` encodes the rest.
public enum PingPayload: Sendable, Equatable {
    case fcm(FCMMessage)
    case target(any TargetMessage)

    /// The request's body.
    public var encoded: [UInt8] {
        switch self {
        case .fcm(let message): message.json
        case .target(let message): message.body
        }
    }

    /// Which sender sends it: `fcm`, or `route:<route>` (each route's target has its own, with its URL and secrets).
    public var sender: String {
        switch self {
        case .fcm: "fcm"
        case .target(let message): Self.sender(route: message.route)
        }
    }

    /// The sender of a route's target.
    public static func sender(route: String) -> String { "route:\(route)" }

    /// The body as a log may show it: a device's registration token is personal data and is redacted.
    public var loggable: String {
        switch self {
        case .fcm(let message):
            guard case .token = message.target else { return String(decoding: message.json, as: UTF8.self) }
            var redacted = message
            redacted.target = .token("<redacted>")
            return String(decoding: redacted.json, as: UTF8.self)
        case .target(let message):
            return String(decoding: message.body, as: UTF8.self)
        }
    }

    /// Who it reaches.
    public var audience: PingAudience {
        switch self {
        case .fcm(let message): PingAudience(message.target)
        case .target(let message): PingAudience(kind: message.kind, name: message.route)
        }
    }

    public static func == (lhs: PingPayload, rhs: PingPayload) -> Bool {
        switch (lhs, rhs) {
        case (.fcm(let left), .fcm(let right)): left == right
        case (.target(let left), .target(let right)): left.isEqual(to: right)
        default: false
        }
    }
}

extension PingAudience {
    /// An FCM target's audience: `topic`, `condition`, or `token` (a device).
    public init(_ target: FCMMessage.Target) {
        switch target {
        case .topic(let topic): self.init(kind: "topic", name: topic)
        case .condition(let condition): self.init(kind: "condition", name: condition)
        case .token(let token): self.init(kind: "token", name: token, isDevice: true)
        }
    }

    public static func topic(_ topic: String) -> PingAudience { PingAudience(.topic(topic)) }
    public static func condition(_ condition: String) -> PingAudience { PingAudience(.condition(condition)) }
}

extension FCMMessage.Target {
    /// The FCM target of an audience an FCM ping reached; nil for another target's kind.
    public init?(_ audience: PingAudience) {
        switch audience.kind {
        case "topic": self = .topic(audience.name)
        case "condition": self = .condition(audience.name)
        case "token": self = .token(audience.name)
        default: return nil
        }
    }
}
