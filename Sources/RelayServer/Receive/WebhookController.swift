import DeliveryEngine
import Foundation
import Hummingbird
import Logging
import RelayCore
import RelayStore
import Tracing

/// `POST /webhooks/remote-config` and `POST /pubsub/remote-config`, served straight on Hummingbird: intake verifies
/// the bytes as received, the controller routes and delivers, and the answer is written once. `openapi.yaml`
/// documents both (the generator skips them, see `openapi-generator-config.yaml`); the conformance tests hold their
/// answers to it. Each request is a span (``RequestSpan``), drawn once intake knows its parent.
struct IngestRoutes: Sendable {
    let intake: WebhookIntake
    let controller: WebhookController

    func register(on router: Router<RelayRequestContext>) {
        router.post("/webhooks/remote-config") { request, _ in await answer(request, ingest: .webhook) }
        router.post("/pubsub/remote-config") { request, _ in await answer(request, ingest: .pubSub) }
    }

    private func answer(_ request: Request, ingest: WebhookIntake.Ingest) async -> Response {
        let info = RequestInfo.current
        let requestID = info?.id ?? ""
        var stages = IntakeStages()
        var verified: VerifiedEvent
        do throws(Refusal) {
            verified = try await intake.verify(request, ingest: ingest, logger: info?.logger ?? Logger(label: "rc-relay"), stages: &stages)
        } catch {
            return await RequestSpan.run(request, stages: stages, refused: error) { _ in error.response(requestID: requestID) }
        }
        return await RequestSpan.run(request, stages: stages, event: verified) { span in
            if let trace = Traces.traceID(of: span?.context) { verified.logger[metadataKey: "trace_id"] = "\(trace)" }
            do throws(Refusal) {
                switch try await controller.relay(verified, requestID: requestID) {
                case .delivered(let body): return Self.json(body, status: .ok)
                case .inProgress(let body): return Self.json(body, status: .accepted)
                }
            } catch {
                span?.attributes["rc_relay.problem"] = error.kind.rawValue
                return error.response(requestID: requestID)
            }
        }
    }

    private static func json(_ body: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}

/// An event ``WebhookIntake`` verified and decoded, sent down the ``EventPath`` and answered: 200 (settled), 202 (kept,
/// still delivering) or a problem, thrown as a ``Refusal``.
struct WebhookController: Sendable {
    let configuration: ConfigurationStore
    /// Admit → plan → deliver → keep, and the newest-relayed mark.
    let path: EventPath
    let metrics: RelayMetrics

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
        guard projects[project] != nil else {
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
        let number = event.version.versionNumber
        record.traceparent = Traces.traceparent(of: Traces.current)
        let summary = IngestAnswer.EventSummary(
            id: eventID, format: event.format.rawValue, project: project, versionNumber: number, updateType: event.version.updateType)
        let source = event.format.rawValue
        switch await path.relay(record, arriving: .request, in: configuration, logger: logger) {
        case .settled(let reports, let duplicate):
            return try settled(reports, duplicate: duplicate, source: source, requestID: requestID, summary: summary, logger: logger)
        case .kept(let here):
            logger.info(
                here ? "delivery continues in the background; the event is kept" : "event kept; the replica that delivers the project now delivers it"
            )
            metrics.webhook(source: source, outcome: "in-progress")
            return .inProgress(IngestAnswer.inProgress(requestID: requestID, event: summary))
        case .underWay(let retryAfter):
            let seconds = retryAfter.map { Int(($0 / .seconds(1)).rounded(.up)) } ?? Int(configuration.settings.answerWithin.components.seconds)
            logger.info("delivery continues; the sender is asked to retry and join it", metadata: ["status": "503"])
            throw Refusal(
                kind: .deliveryInProgress, detail: "the pings are still being delivered; retry to join the delivery under way",
                retryAfter: min(max(1, seconds), 3600))
        case .notStarted(.conflict(let key)):
            throw conflict(key, logger: logger)
        case .notStarted(.saturated):
            throw Refusal(kind: .notReady, detail: "too many deliveries are under way; retry shortly", retryAfter: 5)
                .logged("webhook refused: too many deliveries under way", to: logger)
        case .notStarted(.stopping):
            throw Refusal(kind: .notReady, detail: "the relay is stopping; retry shortly", retryAfter: 5)
                .logged("webhook refused: the relay is stopping", to: logger)
        case .notStarted(.storeUnavailable), .notStarted(.unplanned), .notStarted(.left):
            // Unplanned and left cannot come of a request planned under the configuration its project was found in.
            throw Refusal(
                kind: .notReady, detail: "the relay's shared store did not answer, so nothing was accepted; retry shortly", retryAfter: 5
            ).logged("webhook refused: the shared store did not answer", to: logger)
        }
    }

    private func conflict(_ key: String, logger: Logger) -> Refusal {
        Refusal(
            kind: .eventConflict,
            detail:
                "an event with this id was received for another project or version; a new event needs a new id (webhook-id, ce-id or the Pub/Sub message id)"
        ).logged("webhook refused: its id belongs to another event", to: logger, ["key": "\(key)"])
    }

    private func settled(
        _ reports: [DeliveryReport], duplicate: Bool, source: String, requestID: String, summary: IngestAnswer.EventSummary, logger: Logger
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
        let status = IngestAnswer.status(reports)
        if status == "superseded" {
            // The answer says it, and so does the log: nothing of this version reached FCM, and nothing needs to.
            logger.notice("webhook answered superseded: every ping stood down behind a newer version FCM accepted; nothing was sent")
        }
        metrics.webhook(source: source, outcome: duplicate ? "duplicate" : status)
        return .delivered(IngestAnswer.delivered(requestID: requestID, duplicate: duplicate, event: summary, reports: reports))
    }
}
