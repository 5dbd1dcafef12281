import CoreMetrics
import NIOConcurrencyHelpers

/// The engine's metrics, made through the swift-metrics factory it is given (the relay's Prometheus registry; a test's
/// own). Label values are bounded: routes come from the configuration, outcomes are a fixed set, and a destination's
/// error codes outside those its sender documents (``MessageSender/errorCodes``) are counted as `other`.
final class DeliveryMetrics: Sendable {
    let factory: any MetricsFactory
    let pingsQueued: Gauge
    let deadPings: Counter
    /// Spooled records moved aside on start because they were not an event.
    let spoolQuarantined: Counter
    /// Acknowledged events whose pings their destination has not accepted yet (spooled, tried again).
    let undelivered: Gauge
    let deliveryLatency: Timer
    private let queued = NIOLockedValueBox(0)
    private let counter: LabelledCounters
    private let sends = NIOLockedValueBox<[String: SendMetrics]>([:])

    /// `services`: the destinations whose request metrics exist from the start, at zero (``MessageSender/service``).
    init(factory: any MetricsFactory, services: [String] = []) {
        self.factory = factory
        counter = LabelledCounters(factory: factory)
        pingsQueued = Gauge(label: "rc_relay_queue_depth", factory: factory)
        deadPings = Counter(label: "rc_relay_dead_pings_total", factory: factory)
        spoolQuarantined = Counter(label: "rc_relay_spool_quarantined_total", factory: factory)
        undelivered = Gauge(label: "rc_relay_undelivered_events", factory: factory)
        deliveryLatency = Timer(label: "rc_relay_delivery_latency_seconds", factory: factory)
        pingsQueued.record(0)
        undelivered.record(0)
        for service in services { _ = sendMetrics(service: service, errorCodes: []) }
    }

    /// One destination's requests: `rc_relay_<service>_attempts_total`, `…_retries_total`, `…_responses_total` and
    /// `…_request_duration_seconds`, made once per destination.
    struct SendMetrics: Sendable {
        let prefix: String
        let attempts: Counter
        let retries: Counter
        let latency: Timer
        let errorCodes: Set<String>
        let counter: LabelledCounters

        /// One answer: its HTTP status (`none` when the destination was not reached) and its error code.
        func response(status: Int?, errorCode: String?) {
            let code = errorCode.map { errorCodes.contains($0) ? $0 : "other" } ?? ""
            counter(prefix + "_responses_total", [("status", status.map(String.init) ?? "none"), ("error_code", code)]).increment()
        }
    }

    func sends(_ sender: any MessageSender) -> SendMetrics { sendMetrics(service: sender.service, errorCodes: sender.errorCodes) }

    /// A service's name in metric names and log keys.
    static func keyName(_ service: String) -> String { service.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "_" } }

    private func sendMetrics(service: String, errorCodes: Set<String>) -> SendMetrics {
        let name = Self.keyName(service)
        return sends.withLockedValue { sends in
            if let made = sends[name], errorCodes.isSubset(of: made.errorCodes) { return made }
            let prefix = "rc_relay_" + name
            let made = SendMetrics(
                prefix: prefix, attempts: Counter(label: prefix + "_attempts_total", factory: factory),
                retries: Counter(label: prefix + "_retries_total", factory: factory),
                latency: Timer(label: prefix + "_request_duration_seconds", factory: factory),
                errorCodes: errorCodes.union(sends[name]?.errorCodes ?? []), counter: counter)
            sends[name] = made
            return made
        }
    }

    /// A settled ping. `outcome`: delivered, validated, failed, dead, superseded, interrupted.
    func ping(route: String, outcome: String) {
        counter("rc_relay_pings_total", [("route", route), ("outcome", outcome)]).increment()
    }

    /// A project's requests waited for their paced slot (`delivery.messagesPerSecond`).
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

    /// A destination's quota (a 429) halved a project's pace.
    func paceCut(project: String) { counter("rc_relay_pace_cuts_total", [("project", project)]).increment() }

    /// Pings waiting for or in a request.
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
