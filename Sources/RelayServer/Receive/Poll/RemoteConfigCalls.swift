import DeliveryEngine
import FCMClient
import Foundation
import Logging
import Tracing

/// Remote Config calls as the relay makes them: retried by FCM's rules (``RetryPolicy``) on the delivery clock,
/// within a deadline of the caller's, and counted in the metrics. The client makes one attempt; this decides again.
struct RemoteConfigCalls: Sendable {
    let client: RemoteConfigClient
    let policy: RetryPolicy
    let clock: any DeliveryClock
    let metrics: RelayMetrics

    /// `call` (`listVersions` or `get`, the metric's label) retried until it answers, fails for good, runs out of
    /// attempts, or the next wait would pass `within`. Each attempt is given the time left, to cut its HTTP timeout
    /// to (in real time: a test's clock cannot stop a request).
    func run<T: Sendable>(
        _ call: String, within: Duration, logger: Logger, _ attempt: @Sendable (_ timeLeft: Duration) async throws(RemoteConfigError) -> T
    ) async throws(RemoteConfigError) -> T {
        let deadline = clock.instant() + within
        var attempts = 0
        while true {
            attempts += 1
            let started = clock.instant()
            // Each attempt a span (`Remote Config get`, `Remote Config listVersions`), as FCM's are.
            let span = Traces.startSpan("Remote Config \(call)", ofKind: .client)
            span?.attributes["rc_relay.attempt"] = attempts
            let answer: Result<T, RemoteConfigError> = await Traces.within(span?.context) {
                do throws(RemoteConfigError) {
                    return .success(try await attempt(max(deadline - started, .seconds(1))))
                } catch {
                    return .failure(error)
                }
            }
            do throws(RemoteConfigError) {
                let value = try answer.get()
                metrics.remoteConfigCall(call, status: 200, duration: clock.instant() - started)
                span?.attributes["http.response.status_code"] = 200
                span?.end()
                return value
            } catch {
                let status: Int? = if case .rejected(let response) = error { response.httpStatus } else { nil }
                metrics.remoteConfigCall(call, status: status, duration: clock.instant() - started)
                span?.attributes["http.response.status_code"] = status
                span?.setStatus(SpanStatus(code: .error, message: "\(error)"))
                defer { span?.end() }
                guard case .retry(let delay) = policy.decision(afterRemoteConfig: error, attempt: attempts, now: clock.now()),
                    attempts < policy.maximumAttempts, clock.instant() + delay < deadline
                else { throw error }
                span?.attributes["rc_relay.retry_in_seconds"] = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
                logger.notice(
                    "Remote Config call failed; retrying", metadata: ["call": "\(call)", "error": "\(error)", "retry_in": "\(delay)"])
                await clock.sleep(for: delay)
            }
        }
    }
}
