import Foundation
import Logging
import Metrics
import NIOCore
import RelayCore
import Tracing

/// Sends an event's pings in parallel (within the outbound limit), retrying each by its sender's classification of its
/// failures (``RetryPolicy``), and reports every outcome in route order.
struct Dispatcher: Sendable {
    /// How an attempt ended: stood down before its request (fenced, or behind a version already accepted), or sent.
    enum Attempt: Sendable {
        case fenced(String)
        case behind
        /// A newer version's attempt to the same route and audience started already (``LatestVersions/claim``).
        case underWay
        case sent(Result<String, SendFailure>)
    }

    /// How to send: the project's sender and the retry rules.
    let plan: SendPlan
    let limit: OutboundLimit
    let pacers: Pacers
    let latest: LatestVersions
    let schedules: Schedules
    let history: DeliveryHistory
    let metrics: DeliveryMetrics
    let clock: any DeliveryClock
    /// This process among replicas (``EngineSettings/replica``), in the log line of each request.
    let replica: String
    /// None, but in the test-only `rc-relay-planted` (``PlantedBugs/progress``).
    let planted: PlantedBugs
    /// With several replicas: asked before each request of an event's delivery (nil: this process alone).
    /// Asked right before each request (``DeliveryFence``): nil, or why none may start.
    var fence: (@Sendable (_ project: String) async -> String?)? = nil

    var policy: RetryPolicy { plan.policy }

    func deliver(_ pings: [Ping], batch: DeliveryBatch, control: DeliveryControl, logger: Logger) async -> [DeliveryReport] {
        // Each waved route's shards in this delivery (all, or those a spooled event still owes): its wave's layout.
        let shards = pings.reduce(into: [String: [Int]]()) { shards, ping in
            if let shard = ping.schedule.shard { shards[Ping.routeName(ping.route), default: []].append(shard.index) }
        }
        if pings.count == 1 {  // no child task needed
            return [await deliver(pings[0], batch: batch, control: control, shards: shards, others: false, logger: logger)]
        }
        return await withTaskGroup(of: (Int, DeliveryReport).self) { group in
            for (index, ping) in pings.enumerated() {
                group.addTask { (index, await deliver(ping, batch: batch, control: control, shards: shards, others: true, logger: logger)) }
            }
            var reports = [DeliveryReport?](repeating: nil, count: pings.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
    }

    /// One ping in a span of its own (`deliver ping`), from routing to its outcome; its waits are the span's events,
    /// each request a child span.
    private func deliver(
        _ ping: Ping, batch: DeliveryBatch, control: DeliveryControl, shards: [String: [Int]], others: Bool, logger: Logger
    ) async -> DeliveryReport {
        await Traces.withSpan("deliver ping") { span in
            span?.attributes["rc_relay.project"] = ping.project
            span?.attributes["rc_relay.route"] = ping.route
            span?.attributes["rc_relay.version"] = batch.version.versionNumber
            // The topic or condition; a device's token is personal data and stays out of traces, as out of logs.
            span?.attributes["messaging.destination.name"] = ping.payload.audience.named ?? "(a device)"
            let report = await deliver(ping, batch: batch, control: control, shards: shards, others: others, span: span, logger: logger)
            span?.attributes["rc_relay.delivery_id"] = report.id
            span?.attributes["rc_relay.status"] = report.status.rawValue
            span?.attributes["rc_relay.attempts"] = report.attempts.count
            if report.status == .dead || report.status == .failed {
                span?.setStatus(SpanStatus(code: .error, message: report.error.map { "\($0.errorCode ?? "-") \($0.message)" }))
            }
            return report
        }
    }

    /// One ping, recorded in the delivery log and the metrics from routing to its outcome.
    /// `others`: the delivery has other pings, which may still be due when this one is accepted.
    private func deliver(
        _ ping: Ping, batch: DeliveryBatch, control: DeliveryControl, shards: [String: [Int]], others: Bool, span: (any Span)?,
        logger: Logger
    ) async -> DeliveryReport {
        let validateOnly = plan.validateOnly || batch.validateOnly
        let id = history.start(ping, batch: batch, validateOnly: validateOnly)
        metrics.queueChanged(by: 1)
        var logger = logger
        logger[metadataKey: "route"] = .string(ping.route)
        logger[metadataKey: "delivery_id"] = .string(id)
        logger[metadataKey: "replica"] = .string(replica)
        // An operator's send or retry comes with no event's fields: its ping lines still say what they send.
        if logger[metadataKey: "project"] == nil { logger[metadataKey: "project"] = .string(ping.project) }
        if logger[metadataKey: "version"] == nil { logger[metadataKey: "version"] = "\(batch.version.versionNumber)" }
        if let audience = ping.payload.audience.named { logger[metadataKey: "audience"] = .string(audience) }
        // Only a real delivery of a received event (or an operator's retry of one) may make older pings stand down.
        var realDelivery = !validateOnly && batch.origin != .send && !batch.outlier
        if ping.payload.audience.isDevice { realDelivery = false }
        var report: DeliveryReport
        // Quiet periods and waves are for real deliveries: a dry run or an operator's send goes at once.
        let scheduled = realDelivery && !ping.schedule.isImmediate
        if batch.standDown.contains(ping.route) {
            logger.notice("ping stands down: a newer version waits, kept, for the same audience")
            report = DeliveryReport(route: ping.route, status: .superseded, attempts: [])
        } else if scheduled,
            let ended = await waitForTurn(
                ping, version: batch.version.versionNumber, shards: shards[Ping.routeName(ping.route)] ?? [], id: id, control: control,
                span: span, logger: logger)
        {
            report = DeliveryReport(route: ping.route, status: ended, attempts: [])
        } else {
            report = await send(
                ping, version: batch.version.versionNumber, validateOnly: validateOnly, supersedes: realDelivery, control: control,
                fenced: batch.origin != .send && batch.origin != .retry, logger: logger)
        }
        // Recorded as done when others of the event's pings are still due: a hand-over (a stand-down, a stop) or a crash
        // then sends only what is left. A lone ping's settlement follows at once, and says the same.
        if report.status == .accepted, (scheduled && ping.schedule.shard != nil) || (others && !planted.contains(.progress)) {
            control.onAccepted(ping.route)
        }
        if scheduled, let shard = ping.schedule.shard {
            schedules.ended(
                Schedules.Key(project: ping.project, route: Ping.routeName(ping.route)), version: batch.version.versionNumber, shard: shard.index)
        }
        report.id = id
        metrics.queueChanged(by: -1)
        metrics.ping(route: Ping.routeName(ping.route), outcome: report.status == .accepted ? "delivered" : report.status.rawValue)
        if report.status == .dead { metrics.deadPings.increment() }
        if report.status == .accepted || report.status == .validated {
            metrics.deliveryLatency.recordNanoseconds(Int64(max(0, clock.now().timeIntervalSince(batch.receivedAt)) * 1e9))
        }
        history.settle(id, report)
        return report
    }

    private func send(
        _ ping: Ping, version: Int64, validateOnly: Bool, supersedes: Bool, control: DeliveryControl, fenced: Bool, logger: Logger
    ) async -> DeliveryReport {
        var logger = logger
        // No attempt, first or retry, starts once a newer version's ping is under way to the same devices or its
        // destination accepted one there (a sender's late retry, a parked event tried again, kept events replayed after an outage
        // or a database stall): an older version never follows a newer one there.
        // Keyed by route and audience: a newer version's ping stands in for an older one only if it reaches the same
        // devices (a narrowed ping must not silence a whole-audience one).
        let audience = ping.audience
        if supersedes { latest.record(project: ping.project, route: audience, version: version, now: clock.now()) }
        // The fence, and the delivery's own stop: a delivery stood down (handed back) while this ping waited for the
        // fence's answer sends nothing more, or the replica that takes it up again sends the same ping twice (the fault
        // campaign's seed 60601: a shard waiting on the fence's database check through a stall, sent after its
        // delivery was handed back).
        let fence: (@Sendable (String) async -> String?)?
        if fenced, let ask = self.fence {
            fence = { project in
                if let refusal = await ask(project) { return refusal }
                return control.isStopped ? "its delivery was stood down while it waited; it is handed back" : nil
            }
        } else {
            fence = nil
        }
        // The ping's own sender, by what it carries (PingPayload/sender).
        let sender = plan.sender(for: ping.payload)
        if plan.logPings { logger.info("ping", metadata: ["message": "\(ping.payload.loggable)"]) }
        let deadline = clock.instant() + policy.deadline
        var attempts: [DeliveryReport.Attempt] = []
        var lastError: DeliveryReport.ErrorDetail?
        let pacer = sender.pace.map { pacers.pacer(for: $0.key, rate: $0.rate) } ?? pacers.pacer(for: ping.project)
        let sends = metrics.sends(sender)
        while true {
            // Stopped (a shutdown's hand-over): no attempt starts now; the event is spooled with this route still due.
            if control.isStopped {
                logger.notice("ping interrupted by the stop; it is handed over", metadata: ["attempts": "\(attempts.count)"])
                return DeliveryReport(route: ping.route, status: .interrupted, error: lastError, attempts: attempts)
            }
            // The project's pace (`delivery.messagesPerSecond`): wait for this request's slot; a stop cuts the wait short.
            let wait = pacer.reserve()
            if wait > .zero {
                metrics.pacedWait(project: ping.project)
                _ = await control.pause(for: wait)
                if control.isStopped { continue }
            }
            logger[metadataKey: "attempt"] = "\(attempts.count + 1)"
            // Each attempt a child span (`<service> send`): its HTTP status, the destination's error code, and the wait
            // before the next.
            let attemptSpan = Traces.startSpan(sender.service + " send", ofKind: .client)
            attemptSpan?.attributes["rc_relay.attempt"] = attempts.count + 1
            let outcome = await Traces.within(attemptSpan?.context) {
                await attempt(ping, version, sender, validateOnly, supersedes, fence, logger)
            }
            let result: Result<String, SendFailure>
            switch outcome {
            case .fenced(let refusal):
                attemptSpan?.attributes["rc_relay.outcome"] = "fenced"
                attemptSpan?.end()
                logger.warning("ping not sent: \(refusal)")
                return DeliveryReport(route: ping.route, status: .interrupted, error: lastError, attempts: attempts)
            case .behind:
                attemptSpan?.attributes["rc_relay.outcome"] = "superseded"
                attemptSpan?.end()
                logger.notice("ping stands down: \(sender.service) accepted a newer version's ping to the same audience")
                return DeliveryReport(route: ping.route, status: .superseded, error: lastError, attempts: attempts)
            case .underWay:
                attemptSpan?.attributes["rc_relay.outcome"] = "superseded"
                attemptSpan?.end()
                logger.notice(
                    "ping superseded: a newer version's ping is under way to the same audience", metadata: ["attempts": "\(attempts.count)"])
                return DeliveryReport(route: ping.route, status: .superseded, error: lastError, attempts: attempts)
            case .sent(let sent):
                result = sent
            }
            sends.attempts.increment()
            switch result {
            case .success(let name):
                attemptSpan?.attributes["http.response.status_code"] = 200
                attemptSpan?.end()
                sends.response(status: 200, errorCode: nil)
                if supersedes, !validateOnly { latest.accepted(ping, version: version) }
                attempts.append(DeliveryReport.attempt(nil, at: clock.now()))
                logger[metadataKey: sender.keyName + "_message"] = .string(name)
                logger.info(validateOnly ? "ping validated by \(sender.service)" : "ping accepted by \(sender.service)")
                return DeliveryReport(route: ping.route, status: validateOnly ? .validated : .accepted, messageName: name, attempts: attempts)
            case .failure(let failure):
                let attempt = DeliveryReport.attempt(failure, at: clock.now())
                attemptSpan?.attributes["http.response.status_code"] = attempt.httpStatus
                attemptSpan?.attributes["rc_relay.\(sender.keyName).error_code"] = attempt.errorCode
                attemptSpan?.attributes["error.type"] = attempt.errorCode ?? attempt.httpStatus.map(String.init) ?? "transport"
                attemptSpan?.setStatus(SpanStatus(code: .error, message: failure.description))
                sends.response(status: attempt.httpStatus, errorCode: attempt.errorCode)
                if failure.kind == .throttled {
                    // The destination's quota is the project's: every ping of it slows down, not only this one.
                    pacer.throttled()
                    metrics.paceCut(project: ping.project)
                    logger.warning(
                        "\(sender.service) quota exceeded: the project's pace is halved", metadata: ["pace_per_second": "\(Int(pacer.current))"])
                }
                attempts.append(attempt)
                let report = DeliveryReport(route: ping.route, status: .failed, error: DeliveryReport.detail(failure), attempts: attempts)
                lastError = report.error
                switch policy.decision(after: failure, attempt: attempts.count) {
                case .permanent:
                    attemptSpan?.attributes["rc_relay.outcome"] = "permanent"
                    attemptSpan?.end()
                    logger.error("ping refused by \(sender.service) for good", metadata: ["error": "\(failure)"])
                    return report
                case .retry(let delay):
                    guard attempts.count < policy.maximumAttempts, clock.instant() + delay < deadline else {
                        attemptSpan?.attributes["rc_relay.outcome"] = "dead"
                        attemptSpan?.end()
                        logger.error("ping is dead: retries ran out", metadata: ["error": "\(failure)", "attempts": "\(attempts.count)"])
                        return DeliveryReport(route: report.route, status: .dead, error: report.error, attempts: attempts)
                    }
                    attemptSpan?.attributes["rc_relay.outcome"] = "retry"
                    attemptSpan?.attributes["rc_relay.retry_in_seconds"] = Schedules.seconds(delay)
                    attemptSpan?.end()
                    logger.warning("ping will be retried", metadata: ["error": "\(failure)", "retry_in": "\(delay)"])
                    if failure.kind == .throttled, ping.schedule.shard != nil {
                        // The quota is spent: the wave's turns still to come wait as long as this ping does.
                        schedules.postpone(Schedules.Key(project: ping.project, route: Ping.routeName(ping.route)), by: delay)
                    }
                    sends.retries.increment()
                    control.onRetry(delay)
                    _ = await control.pause(for: delay)
                    if supersedes, latest.isSuperseded(project: ping.project, route: audience, version: version, now: clock.now()) {
                        logger.notice("ping superseded: a newer version's ping took over", metadata: ["attempts": "\(attempts.count)"])
                        return DeliveryReport(route: ping.route, status: .superseded, error: report.error, attempts: attempts)
                    }
                }
            }
        }
    }
}
