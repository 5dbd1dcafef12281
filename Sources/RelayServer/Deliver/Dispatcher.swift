import FCMClient
import Foundation
import Logging
import NIOCore
import RelayCore

/// Sends an event's pings to FCM in parallel (within the outbound limit), retrying each by FCM's rules, and reports
/// every outcome in route order.
struct Dispatcher: Sendable {
    let sender: any MessageSender
    let validateOnly: Bool
    /// Log every message's JSON at info (the development profile shows what it "sent").
    let logPings: Bool
    let policy: RetryPolicy
    let limit: OutboundLimit
    let latest: LatestVersions
    let log: DeliveryLog
    let metrics: RelayMetrics

    /// The message as logged: a device's registration token is personal data and stays out of the log.
    static func loggable(_ message: FCMMessage, encoded: [UInt8]) -> String {
        guard case .token = message.target else { return String(decoding: encoded, as: UTF8.self) }
        var redacted = message
        redacted.target = .token("<redacted>")
        return String(decoding: redacted.json, as: UTF8.self)
    }

    func deliver(_ pings: [Ping], batch: DeliveryBatch, control: DeliveryControl = DeliveryControl(), logger: Logger) async -> [DeliveryReport] {
        if pings.count == 1 { return [await deliver(pings[0], batch: batch, control: control, logger: logger)] }  // no child task needed
        return await withTaskGroup(of: (Int, DeliveryReport).self) { group in
            for (index, ping) in pings.enumerated() {
                group.addTask { (index, await deliver(ping, batch: batch, control: control, logger: logger)) }
            }
            var reports = [DeliveryReport?](repeating: nil, count: pings.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    /// One ping, recorded in the delivery log and the metrics from routing to its outcome.
    private func deliver(_ ping: Ping, batch: DeliveryBatch, control: DeliveryControl, logger: Logger) async -> DeliveryReport {
        let validateOnly = validateOnly || batch.validateOnly
        let id = log.start(ping, batch: batch, validateOnly: validateOnly)
        _ = metrics.queueChanged(by: 1)
        var logger = logger
        logger[metadataKey: "route"] = "\(ping.route)"
        logger[metadataKey: "delivery_id"] = "\(id)"
        // Only a real delivery of a received event (or an operator's retry of one) may make older pings stand down.
        var realDelivery = !validateOnly && batch.origin != .send
        if case .token = ping.message.target { realDelivery = false }
        var report = await send(
            ping, version: batch.version.versionNumber, validateOnly: validateOnly, supersedes: realDelivery, control: control, logger: logger)
        report.id = id
        _ = metrics.queueChanged(by: -1)
        metrics.ping(route: ping.route, outcome: report.status == .accepted ? "delivered" : report.status.rawValue)
        if report.status == .dead { metrics.deadPings.increment() }
        if report.status == .accepted || report.status == .validated {
            metrics.deliveryLatency.recordNanoseconds(Int64(max(0, Date().timeIntervalSince(batch.receivedAt)) * 1e9))
        }
        log.settle(id, report)
        return report
    }

    private func send(
        _ ping: Ping, version: Int64, validateOnly: Bool, supersedes: Bool, control: DeliveryControl, logger: Logger
    ) async -> DeliveryReport {
        var logger = logger
        // Only a ping waiting to retry stands down for a newer one; a first attempt always goes out.
        if supersedes { latest.record(project: ping.project, route: ping.route, version: version) }
        let body = ping.message.json
        if logPings { logger.info("ping", metadata: ["message": "\(Self.loggable(ping.message, encoded: body))"]) }
        let message = ByteBuffer(bytes: body)
        let deadline = ContinuousClock.now + policy.deadline
        var attempts: [DeliveryReport.Attempt] = []
        var lastError: DeliveryReport.ErrorDetail?
        while true {
            // Stopped (a shutdown's hand-over): no attempt starts now; the event is spooled with this route still due.
            if control.isStopped {
                logger.notice("ping interrupted by the stop; it is handed over", metadata: ["attempts": "\(attempts.count)"])
                return DeliveryReport(route: ping.route, status: .interrupted, error: lastError, attempts: attempts)
            }
            logger[metadataKey: "attempt"] = "\(attempts.count + 1)"
            let result = await limit.run { () async -> Result<String, FCMError> in
                let started = ContinuousClock.now
                defer { metrics.fcmLatency.record(duration: ContinuousClock.now - started) }
                do throws(FCMError) {
                    return .success(try await sender.send(project: ping.project, message: message, validateOnly: validateOnly))
                } catch {
                    return .failure(error)
                }
            }
            metrics.attempts.increment()
            switch result {
            case .success(let name):
                metrics.fcmResponse(status: 200, errorCode: nil)
                attempts.append(DeliveryReport.attempt(nil, at: Date()))
                logger.info(validateOnly ? "ping validated by FCM" : "ping accepted by FCM", metadata: ["fcm_message": "\(name)"])
                return DeliveryReport(route: ping.route, status: validateOnly ? .validated : .accepted, messageName: name, attempts: attempts)
            case .failure(let failure):
                let attempt = DeliveryReport.attempt(failure, at: Date())
                metrics.fcmResponse(status: attempt.httpStatus, errorCode: attempt.errorCode)
                attempts.append(attempt)
                let report = DeliveryReport(route: ping.route, status: .failed, error: DeliveryReport.detail(failure), attempts: attempts)
                lastError = report.error
                switch policy.decision(after: failure, attempt: attempts.count) {
                case .permanent:
                    logger.error("ping refused by FCM for good", metadata: ["error": "\(failure)"])
                    return report
                case .retry(let delay):
                    guard attempts.count < policy.maximumAttempts, ContinuousClock.now + delay < deadline else {
                        logger.error("ping is dead: retries ran out", metadata: ["error": "\(failure)", "attempts": "\(attempts.count)"])
                        return DeliveryReport(route: report.route, status: .dead, error: report.error, attempts: attempts)
                    }
                    logger.warning("ping will be retried", metadata: ["error": "\(failure)", "retry_in": "\(delay)"])
                    metrics.retries.increment()
                    control.onRetry(delay)
                    _ = await control.pause(for: delay)
                    if supersedes, latest.isSuperseded(project: ping.project, route: ping.route, version: version) {
                        logger.notice("ping superseded: a newer version's ping took over", metadata: ["attempts": "\(attempts.count)"])
                        return DeliveryReport(route: ping.route, status: .superseded, error: report.error, attempts: attempts)
                    }
                }
            }
        }
    }
}
