import CoreMetrics
import NIOConcurrencyHelpers

/// The engine's metrics, made through the swift-metrics factory it is given (the relay's Prometheus registry; a test's
/// own). Label values are bounded: routes come from the configuration, outcomes are a fixed set, and FCM error codes
/// outside FCM's documented set are counted as `other`.
final class DeliveryMetrics: Sendable {
    /// FCM's documented error codes; anything else is `other`.
    static let fcmErrorCodes: Set<String> = [
        "UNSPECIFIED_ERROR", "INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "QUOTA_EXCEEDED", "UNAVAILABLE",
        "INTERNAL", "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED", "NOT_FOUND", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED",
    ]

    let factory: any MetricsFactory
    let pingsQueued: Gauge
    let attempts: Counter
    let retries: Counter
    let deadPings: Counter
    /// Spooled records moved aside on start because they were not an event.
    let spoolQuarantined: Counter
    /// Acknowledged events whose pings FCM has not accepted yet (spooled, tried again).
    let undelivered: Gauge
    let deliveryLatency: Timer
    let fcmLatency: Timer
    private let queued = NIOLockedValueBox(0)
    private let counter: LabelledCounters

    init(factory: any MetricsFactory) {
        self.factory = factory
        counter = LabelledCounters(factory: factory)
        pingsQueued = Gauge(label: "rc_relay_queue_depth", factory: factory)
        attempts = Counter(label: "rc_relay_fcm_attempts_total", factory: factory)
        retries = Counter(label: "rc_relay_fcm_retries_total", factory: factory)
        deadPings = Counter(label: "rc_relay_dead_pings_total", factory: factory)
        spoolQuarantined = Counter(label: "rc_relay_spool_quarantined_total", factory: factory)
        undelivered = Gauge(label: "rc_relay_undelivered_events", factory: factory)
        deliveryLatency = Timer(label: "rc_relay_delivery_latency_seconds", factory: factory)
        fcmLatency = Timer(label: "rc_relay_fcm_request_duration_seconds", factory: factory)
        pingsQueued.record(0)
        undelivered.record(0)
    }

    /// A settled ping. `outcome`: delivered, validated, failed, dead, superseded, interrupted.
    func ping(route: String, outcome: String) {
        counter("rc_relay_pings_total", [("route", route), ("outcome", outcome)]).increment()
    }

    /// One `messages:send` answer: its HTTP status (`none` when FCM was not reached) and FCM error code.
    func fcmResponse(status: Int?, errorCode: String?) {
        let code = errorCode.map { Self.fcmErrorCodes.contains($0) ? $0 : "other" } ?? ""
        counter("rc_relay_fcm_responses_total", [("status", status.map(String.init) ?? "none"), ("error_code", code)]).increment()
    }

    /// A project's FCM requests waited for their paced slot (`delivery.messagesPerSecond`).
    func pacedWait(project: String) { counter("rc_relay_paced_waits_total", [("project", project)]).increment() }

    /// A route's wave of shard pings began (a newer version taking one over begins another).
    func waveStarted(project: String, route: String) {
        counter("rc_relay_waves_total", [("project", project), ("route", route)]).increment()
    }

    /// A shard's turn in a wave came: its ping goes out.
    func waveShard(project: String, route: String) {
        counter("rc_relay_wave_shards_total", [("project", project), ("route", route)]).increment()
    }

    /// A ping ended its quiet period: `outcome` is `sent`, or `replaced` when a newer version arrived meanwhile.
    func quietPeriod(project: String, route: String, outcome: String) {
        counter("rc_relay_quiet_periods_total", [("project", project), ("route", route), ("outcome", outcome)]).increment()
    }

    /// A 429 from FCM halved a project's pace.
    func paceCut(project: String) { counter("rc_relay_pace_cuts_total", [("project", project)]).increment() }

    /// Pings waiting for or in a `messages:send`.
    func queueChanged(by delta: Int) {
        queued.withLockedValue { value in
            value += delta
            pingsQueued.record(value)  // inside the lock, so the gauge never keeps an older value
        }
    }

    var queueDepth: Int { queued.withLockedValue { $0 } }
}

/// Counters by label and label values, made once: making one takes the registry's lock and builds its name.
package final class LabelledCounters: Sendable {
    let factory: any MetricsFactory
    private let cache = NIOLockedValueBox<[Key: Counter]>([:])

    /// A counter's label and the caller's dimensions as they are, compared and hashed pair by pair; joining them into
    /// a new string was work every look-up (three a webhook) repeated (issue #35).
    private struct Key: Hashable {
        let label: String
        let dimensions: [(String, String)]

        static func == (a: Key, b: Key) -> Bool { a.label == b.label && a.dimensions.elementsEqual(b.dimensions, by: ==) }

        func hash(into hasher: inout Hasher) {
            hasher.combine(label)
            hasher.combine(dimensions.count)
            for (name, value) in dimensions {
                hasher.combine(name)
                hasher.combine(value)
            }
        }
    }

    package init(factory: any MetricsFactory) { self.factory = factory }

    package func callAsFunction(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        let key = Key(label: label, dimensions: dimensions)
        return cache.withLockedValue { cache in
            if let counter = cache[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            cache[key] = counter
            return counter
        }
    }
}
