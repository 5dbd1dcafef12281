import Foundation
import Logging
import RelayCore

/// Route → deliver → answer, for an event ``WebhookIntake`` verified and decoded. Failures are thrown as
/// ``Refusal``s; the answer is 200 (settled), 202 (spooled, still delivering) or a problem.
struct WebhookController: Sendable {
    let runtime: RelayRuntime
    let deliveries: DeliveryService

    /// The answer's JSON body (``IngestAnswer``): `200` when settled, `202` when spooled and still delivering.
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
            runtime.metrics.webhook(source: source, outcome: error.kind.rawValue)
            throw error
        }
    }

    private func relay(_ event: RemoteConfigEvent, webhookID: String?, requestID: String, logger: Logger) async throws(Refusal) -> Answer {
        var logger = logger
        let projects = runtime.configuration.projects
        let project = event.project ?? projects.defaultID
        guard projects[project] != nil else {
            logger.notice("webhook refused: unknown project", metadata: ["project": "\(project)"])
            throw Refusal(
                kind: .unknownProject,
                detail: "project '\(project)' is not configured; this relay sends for " + projects.ids.map { "'\($0)'" }.joined(separator: ", "))
        }
        let eventID = event.id ?? webhookID
        logger[metadataKey: "event_id"] = "\(eventID ?? "-")"
        logger[metadataKey: "project"] = "\(project)"
        logger[metadataKey: "version"] = "\(event.version.versionNumber)"
        logger.info("webhook accepted", metadata: ["format": "\(event.format.rawValue)"])
        // The same event by id, or the same version of the project by another way in, is one event.
        let keys = ["\(project)/version/\(event.version.versionNumber)", eventID.map { "\(project)/id/\($0)" }].compactMap { $0 }
        let record = SpoolRecord(
            keys: keys, project: project, eventID: eventID, format: event.format.rawValue, version: event.version,
            receivedAt: Date())
        let summary = IngestAnswer.EventSummary(
            id: eventID, format: event.format.rawValue, project: project, versionNumber: event.version.versionNumber,
            updateType: event.version.updateType)
        let source = event.format.rawValue
        switch await deliveries.deliver(record, logger: logger) {
        case .settled(let reports, let duplicate):
            if duplicate { logger.info("duplicate event: answered from the first delivery, nothing sent again") }
            // A dead ping (retries ran out) is worth the sender's retry; a permanent refusal is not: it is answered 200,
            // remembered, and left to an operator (fix, then POST /admin/deliveries/{id}/retry).
            let dead = reports.filter { $0.status == .dead }.map(\.route)
            guard dead.isEmpty else {
                throw Refusal(
                    kind: .deliveryFailed, detail: "the ping for route(s) \(dead.joined(separator: ", ")) ran out of retries; a retry of this event delivers it",
                    deliveries: reports)
            }
            let failed = reports.contains { $0.status == .failed }
            runtime.metrics.webhook(source: source, outcome: duplicate ? "duplicate" : failed ? "failed" : "delivered")
            return .delivered(IngestAnswer.delivered(failed: failed, requestID: requestID, duplicate: duplicate, event: summary, reports: reports))
        case .pending:
            let retry = max(1, Int(runtime.configuration.settings.answerWithin.components.seconds))
            let inProgress = Refusal(kind: .deliveryInProgress, detail: "the pings are still being delivered; retry to join the delivery under way", retryAfter: retry)
            guard deliveries.recent.spool != nil else {
                logger.info("delivery continues; the sender is asked to retry and join it", metadata: ["status": "503"])
                throw inProgress
            }
            do {
                try deliveries.recent.spoolIfRunning(record)
            } catch {
                logger.error("the event could not be spooled", metadata: ["error": "\(error)"])
                throw inProgress
            }
            logger.info("delivery continues in the background; the event is spooled")
            runtime.metrics.webhook(source: source, outcome: "in-progress")
            return .inProgress(IngestAnswer.inProgress(requestID: requestID, event: summary))
        }
    }
}
