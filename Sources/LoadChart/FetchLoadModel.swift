/// The expected rate of Remote Config fetches after a publish, for `rc-relay simulate`: how many devices fetch each
/// second when a ping reaches them at once, in staged waves, or with a client-side delay.
///
/// The model: the devices are split evenly over `shards` shard topics; shard k is pinged at `k × spread / shards`
/// seconds (the first at 0). A device receives its ping within `delivery` seconds of the send (FCM's topic fan-out,
/// uniformly), then waits a uniform random delay of up to `clientDelay` seconds before it fetches. The fetch rate is
/// then a sum of trapezoids, one per shard, exactly as computed here; every device is assumed online.
public struct FetchLoadModel: Sendable, Equatable {
    public var devices: Double
    public var shards: Int
    public var spread: Double
    public var clientDelay: Double
    public var delivery: Double

    public init(devices: Double, shards: Int = 1, spread: Double = 0, clientDelay: Double = 0, delivery: Double = 10) {
        (self.devices, self.shards, self.spread, self.clientDelay, self.delivery) = (devices, shards, spread, clientDelay, delivery)
    }

    /// Why the settings cannot be modelled, or nil.
    public var problem: String? {
        if !(devices >= 1 && devices <= 1e10) { return "devices must be 1 to 10,000,000,000" }
        if !(1...1_000).contains(shards) { return "shards must be 1 to 1,000" }
        if !(spread >= 0 && spread <= 86_400) { return "spread must be 0 to 86,400 seconds" }
        if !(clientDelay >= 0 && clientDelay <= 86_400) { return "client delay must be 0 to 86,400 seconds" }
        if !(delivery >= 0.1 && delivery <= 3_600) { return "delivery must be 0.1 to 3,600 seconds" }
        return nil
    }

    /// When shard `k` is pinged, in seconds after the publish.
    public func sendTime(ofShard k: Int) -> Double { Double(k) * spread / Double(shards) }

    /// Seconds after the publish by which every device has fetched.
    public var end: Double { sendTime(ofShard: shards - 1) + delivery + clientDelay }

    /// The expected fetches per second at `t` seconds after the publish.
    public func rate(at t: Double) -> Double {
        let perShard = devices / Double(shards)
        return (0..<shards).reduce(0) { $0 + perShard * density(t - sendTime(ofShard: $1)) }
    }

    /// The instants where the rate changes slope (every shard trapezoid's corners), 0 and ``end`` included, in order:
    /// the rate is linear between two of them.
    public var corners: [Double] {
        let (low, high) = (min(delivery, clientDelay), max(delivery, clientDelay))
        var times: Set<Double> = [0, end]
        for k in 0..<shards {
            for corner in [0, low, high, low + high] { times.insert(sendTime(ofShard: k) + corner) }
        }
        return times.sorted()
    }

    /// The spans of time (from, to) when the rate is above `limit`, exactly: the rate is linear between corners.
    public func spans(above limit: Double) -> [(from: Double, to: Double)] {
        var spans: [(from: Double, to: Double)] = []
        let times = corners
        for (t0, t1) in zip(times, times.dropFirst()) {
            // The rate's one-sided limits at the segment's ends: it jumps at a corner when there is no client delay.
            let (r0, r1) = (rate(at: t0 + (t1 - t0) * 1e-9), rate(at: t1 - (t1 - t0) * 1e-9))
            guard max(r0, r1) > limit else { continue }
            let from = r0 > limit ? t0 : t0 + (limit - r0) / (r1 - r0) * (t1 - t0)
            let to = r1 > limit ? t1 : t0 + (limit - r0) / (r1 - r0) * (t1 - t0)
            if let last = spans.last, abs(last.to - from) < 1e-9 {
                spans[spans.count - 1].to = to
            } else {
                spans.append((from, to))
            }
        }
        return spans
    }

    /// The rate drawn exactly: at each corner its value from the left and from the right (they differ where it jumps),
    /// from 0 before the publish to 0 after ``end``.
    public var outline: [(t: Double, rate: Double)] {
        let nudge = max(end, 1) * 1e-9
        var points: [(t: Double, rate: Double)] = [(0, 0)]
        for t in corners {
            for value in [rate(at: t - nudge), rate(at: t + nudge)]
            where points.last.map({ $0.t != t || abs($0.rate - value) > max(1e-9, abs(value) * 1e-6) }) ?? true {
                points.append((t, value))
            }
        }
        return points
    }

    /// The highest fetch rate and when it is first reached. The rate is piecewise linear, so its maximum is at a
    /// corner of some shard's trapezoid: those are the only instants looked at.
    public var peak: (rate: Double, at: Double) {
        var best = (rate: 0.0, at: 0.0)
        for t in corners {
            let value = rate(at: t)
            if value > best.rate * (1 + 1e-12) { best = (value, t) }
        }
        return best
    }

    /// The density of (delivery + client delay) at `x`: a uniform on [0, delivery] plus a uniform on
    /// [0, clientDelay], a trapezoid (a rectangle when there is no client delay).
    public func density(_ x: Double) -> Double {
        let (a, b) = (min(delivery, clientDelay), max(delivery, clientDelay))
        guard x >= 0, x <= a + b else { return 0 }
        if a == 0 { return 1 / b }
        if x < a { return x / (a * b) }
        if x <= b { return 1 / b }
        return (a + b - x) / (a * b)
    }

    /// The share of a shard's devices that have fetched by `x` seconds after its send.
    public func cumulative(_ x: Double) -> Double {
        let (a, b) = (min(delivery, clientDelay), max(delivery, clientDelay))
        if x <= 0 { return 0 }
        if x >= a + b { return 1 }
        if a == 0 { return x / b }
        if x <= a { return x * x / (2 * a * b) }
        if x <= b { return (x - a / 2) / b }
        let rest = a + b - x
        return 1 - rest * rest / (2 * a * b)
    }
}
