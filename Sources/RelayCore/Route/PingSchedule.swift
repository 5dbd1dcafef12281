/// A route's staged waves: its audience split over `shards` shard topics, sent evenly across `spread`.
public struct Waves: Sendable, Equatable {
    public let shards: Int
    public let spreadSeconds: Int
    /// The shard topics' names, `{shard}` standing for 0 … shards − 1.
    public let topicPattern: String

    public static let placeholder = "{shard}"
    public static let maximumShards = 1000

    public init(shards: Int, spreadSeconds: Int, topicPattern: String) {
        (self.shards, self.spreadSeconds, self.topicPattern) = (shards, spreadSeconds, topicPattern)
    }

    public func topic(shard: Int) -> String { topicPattern.replacingOccurrences(of: Self.placeholder, with: String(shard)) }

    /// The time between two shards' sends.
    public var spacing: Duration { .seconds(spreadSeconds) / shards }
}

/// When a ping may make its first attempt: after its route's quiet period, and at its shard's turn in a wave.
public struct PingSchedule: Sendable, Equatable {
    /// `debounceSeconds`: the ping waits this long, and stands down if a newer version arrives meanwhile.
    public var quiet: Duration
    /// The ping's place in its route's wave.
    public var shard: Shard?

    public struct Shard: Sendable, Equatable, Codable {
        public var index: Int
        public var count: Int
        public var spacing: Duration
        public init(index: Int, count: Int, spacing: Duration) { (self.index, self.count, self.spacing) = (index, count, spacing) }
    }

    public init(quiet: Duration = .zero, shard: Shard? = nil) { (self.quiet, self.shard) = (quiet, shard) }

    public static let immediate = PingSchedule()
    public var isImmediate: Bool { quiet == .zero && shard == nil }
}
