import CoreMetrics
import DeliveryEngine
import FCMClient
import Foundation
import NIOConcurrencyHelpers
import Prometheus

/// The relay's Prometheus registry (one per relay, so tests running several relays in one process each see their own)
/// and the metrics of the receiving side; the delivery engine makes its own through ``factory``. Label values are
/// bounded: sources and outcomes are fixed sets.
public final class RelayMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    let ready: CoreMetrics.Gauge
    let counter: LabelledCounters
    private let timers = NIOLockedValueBox<[String: CoreMetrics.Timer]>([:])

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let fast: [Duration] = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        factory.durationHistogramBuckets = [
            "rc_relay_fcm_request_duration_seconds": fast,
            "rc_relay_remote_config_request_duration_seconds": fast,
            "rc_relay_store_statement_duration_seconds": [.milliseconds(1), .milliseconds(2), .milliseconds(5)] + fast,
            // Delivery includes retries: minutes, not milliseconds, at the far end.
            "rc_relay_delivery_latency_seconds": fast + [.seconds(30), .seconds(60), .seconds(300), .seconds(900)],
        ]
        self.factory = factory
        counter = LabelledCounters(factory: factory)
        ready = CoreMetrics.Gauge(label: "rc_relay_ready", factory: factory)
        ready.record(0)
    }

    /// A webhook's outcome. `source`: the event's format, or `unknown` when refused before decoding; `outcome`:
    /// delivered, duplicate, failed, in-progress, or the problem's type.
    func webhook(source: String, outcome: String) {
        counter("rc_relay_webhooks_received_total", [("source", source), ("outcome", outcome)]).increment()
    }

    /// An access-token request's outcome: success or failure.
    func tokenRefresh(succeeded: Bool) {
        counter("rc_relay_token_refreshes_total", [("outcome", succeeded ? "success" : "failure")]).increment()
    }

    /// One Remote Config request: `call` is `listVersions` or `get`; `status` its HTTP status (nil: none came back).
    func remoteConfigCall(_ call: String, status: Int?, duration: Duration) {
        counter("rc_relay_remote_config_requests_total", [("call", call), ("status", status.map(String.init) ?? "none")]).increment()
        let timer = timers.withLockedValue { timers in
            if let timer = timers[call] { return timer }
            let timer = CoreMetrics.Timer(label: "rc_relay_remote_config_request_duration_seconds", dimensions: [("call", call)], factory: factory)
            timers[call] = timer
            return timer
        }
        timer.record(duration: duration)
    }

    /// One catch-up poll of one project. `outcome`: `current` (nothing missed), `relayed` (a missed version was
    /// pinged), `waiting` (a new version is inside its grace period), `failed` (Remote Config gave no usable answer).
    func poll(outcome: String) {
        counter("rc_relay_polls_total", [("outcome", outcome)]).increment()
    }

    /// A version routed by change-aware routes: whether what it changed was known (else whole audiences were pinged).
    func templateChange(known: Bool) {
        counter("rc_relay_template_changes_total", [("outcome", known ? "known" : "unknown")]).increment()
    }

    /// One statement on the shared store (`admit`, `acquire`, `pending`, …): how long it took, and whether it failed
    /// (no answer within the statement timeout, or refused).
    func storeStatement(_ statement: String, duration: Duration, failed: Bool) {
        if failed { counter("rc_relay_store_errors_total", [("statement", statement)]).increment() }
        let key = "store/" + statement
        let timer = timers.withLockedValue { timers in
            if let timer = timers[key] { return timer }
            let timer = CoreMetrics.Timer(
                label: "rc_relay_store_statement_duration_seconds", dimensions: [("statement", statement)], factory: factory)
            timers[key] = timer
            return timer
        }
        timer.record(duration: duration)
    }

    /// The Prometheus text exposition.
    func exposition() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(8192)
        registry.emit(into: &buffer)
        return buffer
    }
}
