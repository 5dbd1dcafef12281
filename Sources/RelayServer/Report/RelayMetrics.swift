import CoreMetrics
import FCMClient
import Foundation
import Prometheus

/// The relay's metrics, through swift-metrics into one Prometheus registry per relay (so tests running several relays
/// in one process each see their own). Label values are bounded: sources and outcomes are fixed sets, routes come
/// from the configuration, and FCM error codes outside FCM's documented set are counted as `other`.
public final class RelayMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    /// FCM's documented error codes (`facts.md` §3); anything else is `other`.
    static let fcmErrorCodes: Set<String> = [
        "UNSPECIFIED_ERROR", "INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "QUOTA_EXCEEDED", "UNAVAILABLE",
        "INTERNAL", "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED", "NOT_FOUND", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED",
    ]

    let pingsQueued: CoreMetrics.Gauge
    let ready: CoreMetrics.Gauge
    let attempts: CoreMetrics.Counter
    let retries: CoreMetrics.Counter
    let deadPings: CoreMetrics.Counter
    /// Spool files moved aside on start because they were not an event.
    let spoolQuarantined: CoreMetrics.Counter
    /// Acknowledged events whose pings FCM has not accepted yet (spooled, tried again).
    let undelivered: CoreMetrics.Gauge
    let deliveryLatency: CoreMetrics.Timer
    let fcmLatency: CoreMetrics.Timer
    private let queued = Locked(0)
    /// Counters by label and label values, made once: making one takes the registry's lock and builds its name.
    private let counters = Locked<[String: CoreMetrics.Counter]>([:])

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let fast: [Duration] = [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10)]
        factory.durationHistogramBuckets = [
            "rc_relay_fcm_request_duration_seconds": fast,
            // Delivery includes retries: minutes, not milliseconds, at the far end.
            "rc_relay_delivery_latency_seconds": fast + [.seconds(30), .seconds(60), .seconds(300), .seconds(900)],
        ]
        self.factory = factory
        pingsQueued = CoreMetrics.Gauge(label: "rc_relay_queue_depth", factory: factory)
        ready = CoreMetrics.Gauge(label: "rc_relay_ready", factory: factory)
        attempts = CoreMetrics.Counter(label: "rc_relay_fcm_attempts_total", factory: factory)
        retries = CoreMetrics.Counter(label: "rc_relay_fcm_retries_total", factory: factory)
        deadPings = CoreMetrics.Counter(label: "rc_relay_dead_pings_total", factory: factory)
        spoolQuarantined = CoreMetrics.Counter(label: "rc_relay_spool_quarantined_total", factory: factory)
        undelivered = CoreMetrics.Gauge(label: "rc_relay_undelivered_events", factory: factory)
        deliveryLatency = CoreMetrics.Timer(label: "rc_relay_delivery_latency_seconds", factory: factory)
        fcmLatency = CoreMetrics.Timer(label: "rc_relay_fcm_request_duration_seconds", factory: factory)
        pingsQueued.record(0)
        ready.record(0)
        undelivered.record(0)
    }

    /// A webhook's outcome. `source`: the event's format, or `unknown` when refused before decoding; `outcome`:
    /// delivered, duplicate, failed, in-progress, or the problem's type.
    func webhook(source: String, outcome: String) {
        counter("rc_relay_webhooks_received_total", [("source", source), ("outcome", outcome)]).increment()
    }

    /// A settled ping. `outcome`: delivered, validated, failed, dead, superseded.
    func ping(route: String, outcome: String) {
        counter("rc_relay_pings_total", [("route", route), ("outcome", outcome)]).increment()
    }

    /// One `messages:send` answer: its HTTP status (`none` when FCM was not reached) and FCM error code.
    func fcmResponse(status: Int?, errorCode: String?) {
        let code = errorCode.map { Self.fcmErrorCodes.contains($0) ? $0 : "other" } ?? ""
        counter("rc_relay_fcm_responses_total", [("status", status.map(String.init) ?? "none"), ("error_code", code)]).increment()
    }

    /// An access-token request's outcome: success or failure.
    func tokenRefresh(succeeded: Bool) {
        counter("rc_relay_token_refreshes_total", [("outcome", succeeded ? "success" : "failure")]).increment()
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Counter {
        var key = label
        for (name, value) in dimensions { key += "\u{1}\(name)=\(value)" }
        return counters.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
            cache[key] = counter
            return counter
        }
    }

    /// Pings waiting for or in a `messages:send`; readiness compares it with `delivery.maxQueuedPings`.
    func queueChanged(by delta: Int) -> Int {
        queued.withLock { value in
            value += delta
            pingsQueued.record(value)  // inside the lock, so the gauge never keeps an older value
            return value
        }
    }

    var queueDepth: Int { queued.withLock { $0 } }

    /// The Prometheus text exposition.
    func exposition() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(8192)
        registry.emit(into: &buffer)
        return buffer
    }
}
