import DeliveryEngine
import Foundation
import Logging
import RelayCore
import RelayStore
import Tracing

/// Route → deliver → answer, for an event ``WebhookIntake`` verified and decoded. Failures are thrown as
/// ``Refusal``s; the answer is 200 (settled), 202 (kept, still delivering) or a problem.
struct WebhookController: Sendable {
    let configuration: ConfigurationStore
    let engine: DeliveryEngine
    /// Routes the version (fetching what it changed when a route asks).
    let planner: Planner
    /// Told each version delivered or kept, so catch-up polling does not relay it again.
    let relayed: RelayedVersions
    let metrics: RelayMetrics
    /// Where the event is kept and who delivers its project (this process alone, or replicas sharing a store).
    let admission: any Admission
    /// Tells a version Remote Config could not have published (relayed, but moving no mark).
    let versions: VersionCheck

    /// The answer's JSON body (``IngestAnswer``): `200` when settled, `202` when kept and still delivering.
    enum Answer {
        case delivered([UInt8])
        case inProgress([UInt8])
    }

    func relay(_ verified: VerifiedEvent, requestID: String) async throws(Refusal) -> Answer {
        let event = verified.event
        let source = event.format.rawValue
        do {
            return try await relay(event, webhookID: verified.webhookID, requestID: requestID, logger: verified.logger)
        } catch {
            metrics.webhook(source: source, outcome: error.kind.rawValue)
            throw error
        }
    }

    private func relay(_ event: RemoteConfigEvent, webhookID: String?, requestID: String, logger: Logger) async throws(Refusal) -> Answer {
        var logger = logger
        let configuration = configuration.current
        let projects = configuration.projects
        let project = event.project ?? projects.defaultID
        guard let pipeline = projects[project] else {
            throw Refusal(
                kind: .unknownProject,
                detail: "project '\(project)' is not configured; this relay sends for " + projects.ids.map { "'\($0)'" }.joined(separator: ", ")
            ).logged("webhook refused: unknown project", to: logger, ["project": "\(project)"])
        }
        let eventID = event.id ?? webhookID
        logger[metadataKey: "event_id"] = .string(eventID ?? "-")
        logger[metadataKey: "project"] = .string(project)
        logger[metadataKey: "version"] = "\(event.version.versionNumber)"
        logger[metadataKey: "format"] = .string(event.format.rawValue)
        // Not at info: every outcome has its own decision line (a ping accepted, a duplicate, kept, refused), and a
        // third line per webhook was about 5 µs of its CPU (issue #35).
        logger.debug("webhook accepted")
        // The same event by id, or the same version of the project by another way in, is one event; a signed request's
        // `webhook-id` is its identity whatever the unsigned headers say (``EventRecord/keys(project:version:eventID:webhookID:)``).
        let keys = EventRecord.keys(project: project, version: event.version.versionNumber, eventID: event.id, webhookID: webhookID)
        var record = EventRecord(
            keys: keys, project: project, eventID: eventID, format: event.format.rawValue, version: event.version,
            receivedAt: Date())
        // The newest version known here; for a version far beyond it, the store's (what any replica relayed): a replica
        // that just started knows nothing yet, and must not take a far-off number for a real one (issue #50).
        var known = relayed.newest(project)
        let number = event.version.versionNumber
        if number > VersionCheck.margin, number - VersionCheck.margin > known ?? 0, let shared = try? await admission.relayed(project) {
            known = max(known ?? shared, shared)
        }
        let outlier = await versions.isOutlier(
            event.version.versionNumber, known: known, project: project, pipeline: pipeline, settings: configuration.settings, logger: logger)
        if outlier { record.outlier = true }
        let summary = IngestAnswer.EventSummary(
            id: eventID, format: event.format.rawValue, project: project, versionNumber: event.version.versionNumber,
            updateType: event.version.updateType)
        let source = event.format.rawValue
        let committed: Bool
        record.traceparent = Traces.traceparent(of: Traces.current)
        let admitted = try await Self.inSpan("admit") { span throws(Refusal) in
            span?.attributes["rc_relay.project"] = project
            span?.attributes["rc_relay.version"] = event.version.versionNumber
            let outcome: Admitted
            do {
                outcome = try await admission.admit(record, window: configuration.settings.dedupWindow, logger: logger)
            } catch {
                throw Refusal(
                    kind: .notReady, detail: "the relay's shared store did not answer, so nothing was accepted; retry shortly", retryAfter: 5)
            }
            span?.attributes["rc_relay.admission"] = outcome.name
            return outcome
        }
        switch admitted {
        case .deliverHere(let kept, let row):
            // This process delivers the project's events: deliver (or join) here, and answer with the outcome.
            committed = kept
            record.storeRow = row
        case .elsewhere:
            if !outlier { relayed.note(project, record.version.versionNumber, logger: logger) }
            logger.info("event kept; the replica that delivers the project now delivers it")
            metrics.webhook(source: source, outcome: "in-progress")
            return .inProgress(IngestAnswer.inProgress(requestID: requestID, event: summary))
        case .settled(let reports):
            return try settled(
                reports, duplicate: true, source: source, requestID: requestID, summary: summary, marks: !outlier, logger: logger)
        case .conflict(let key):
            throw conflict(key, logger: logger)
        }
        let started = ContinuousClock.now
        // The project is in this configuration (its pipeline was found above), so a plan is always made; none would
        // be an event with nothing to send.
        let plan =
            await planner.plan(record, since: relayed.newest(project), in: configuration, logger: logger)
            ?? DeliveryPlan(pings: [], send: pipeline.send)
        // The answer's wait counts from the request, not from the end of routing.
        let wait = max(configuration.settings.answerWithin - (ContinuousClock.now - started), configuration.settings.answerWithin / 10)
        switch await engine.deliver(record, plan: plan, wait: wait, onDisk: committed, logger: logger) {
        case .settled(let reports, let duplicate):
            return try settled(
                reports, duplicate: duplicate, source: source, requestID: requestID, summary: summary, marks: !outlier, logger: logger)
        case .conflict(let key):
            throw conflict(key, logger: logger)
        case .saturated:
            throw Refusal(kind: .notReady, detail: "too many deliveries are under way; retry shortly", retryAfter: 5)
                .logged("webhook refused: too many deliveries under way", to: logger)
        case .stopping:
            throw Refusal(kind: .notReady, detail: "the relay is stopping; retry shortly", retryAfter: 5)
                .logged("webhook refused: the relay is stopping", to: logger)
        case .pending(let delivery, let retryAfter):
            let seconds = retryAfter.map { Int(($0 / .seconds(1)).rounded(.up)) } ?? Int(configuration.settings.answerWithin.components.seconds)
            let inProgress = Refusal(
                kind: .deliveryInProgress, detail: "the pings are still being delivered; retry to join the delivery under way",
                retryAfter: min(max(1, seconds), 3600))
            switch admission.keep(delivery, logger: logger) {
            case .notKept:
                logger.info("delivery continues; the sender is asked to retry and join it", metadata: ["status": "503"])
                throw inProgress
            case .settled(let reports):
                return try settled(
                    reports, duplicate: false, source: source, requestID: requestID, summary: summary, marks: !outlier, logger: logger)
            case .kept:
                if !outlier { relayed.note(project, record.version.versionNumber, logger: logger) }
                logger.info("delivery continues in the background; the event is kept")
                metrics.webhook(source: source, outcome: "in-progress")
                return .inProgress(IngestAnswer.inProgress(requestID: requestID, event: summary))
            }
        }
    }

    /// `body` in a span of its own, a child of the current one; a refusal marks it an error.
    static func inSpan<T: Sendable>(_ name: String, _ body: ((any Span)?) async throws(Refusal) -> T) async throws(Refusal) -> T {
        let result: Result<T, Refusal> = await Traces.withSpan(name) { span in
            do throws(Refusal) {
                return .success(try await body(span))
            } catch {
                span?.setStatus(SpanStatus(code: .error, message: error.kind.rawValue))
                return .failure(error)
            }
        }
        return try result.get()
    }

    private func conflict(_ key: String, logger: Logger) -> Refusal {
        Refusal(
            kind: .eventConflict,
            detail:
                "an event with this id was received for another project or version; a new event needs a new id (webhook-id, ce-id or the Pub/Sub message id)"
        ).logged("webhook refused: its id belongs to another event", to: logger, ["key": "\(key)"])
    }

    private func settled(
        _ reports: [DeliveryReport], duplicate: Bool, source: String, requestID: String, summary: IngestAnswer.EventSummary, marks: Bool,
        logger: Logger
    ) throws(Refusal) -> Answer {
        if duplicate { logger.info("duplicate event: answered from the first delivery, nothing sent again") }
        // A dead ping (retries ran out) is worth the sender's retry; a permanent refusal is not: it is answered 200,
        // remembered, and left to an operator (fix, then POST /admin/deliveries/{id}/retry).
        let dead = reports.filter(\.unfinished).map(\.route)
        guard dead.isEmpty else {
            throw Refusal(
                kind: .deliveryFailed,
                detail: "the ping for route(s) \(dead.joined(separator: ", ")) ran out of retries; a retry of this event delivers it",
                deliveries: reports
            ).logged("webhook not delivered: a ping ran out of retries", to: logger)
        }
        if marks { relayed.note(summary.project, summary.versionNumber, logger: logger) }
        let status = IngestAnswer.status(reports)
        if status == "superseded" {
            // The answer says it, and so does the log: nothing of this version reached FCM, and nothing needs to.
            logger.notice("webhook answered superseded: every ping stood down behind a newer version FCM accepted; nothing was sent")
        }
        metrics.webhook(source: source, outcome: duplicate ? "duplicate" : status)
        return .delivered(IngestAnswer.delivered(requestID: requestID, duplicate: duplicate, event: summary, reports: reports))
    }
}
