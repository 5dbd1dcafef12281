import DeliveryEngine
import Foundation
import Logging
import OpenAPIRuntime
import RelayCore

/// The delivery history: list, show, retry and discard pings; reset a project's marks.
extension AdminController {
    func deliveries(_ query: Operations.ListDeliveries.Input.Query) async throws(Refusal) -> Components.Schemas.DeliveryList {
        var version: Int64?
        if let text = query.version {
            // As openapi.yaml says: 1 to 19 digits, nothing else, within int64.
            guard (1...19).contains(text.utf8.count), text.utf8.allSatisfy({ (48...57).contains($0) }), let number = Int64(text) else {
                throw Refusal(kind: .invalidRequest, detail: "version must be a version number (1 to 19 digits, at most 9223372036854775807)")
            }
            version = number
        }
        let limit = query.limit ?? 100
        guard (1...1000).contains(limit) else { throw Refusal(kind: .invalidRequest, detail: "limit must be 1 to 1000") }
        let filter = DeliveryHistory.Filter(
            status: query.status?.rawValue, route: query.route, project: query.project, version: version, limit: limit)
        return .init(deliveries: try await history(filter).map(Components.Schemas.DeliveryRecord.init))
    }

    /// A filter or id with a control character (a NUL) matches nothing any replica keeps: a 400, in every mode (the
    /// shared store would refuse the statement, which is not an outage).
    static func refuseControlCharacters(_ value: String?, name: String) throws(Refusal) {
        guard let value, value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return }
        throw Refusal(kind: .invalidRequest, detail: "\(name) contains a control character")
    }

    /// The pings that match, newest first, from every replica when the store is shared.
    func history(_ filter: DeliveryHistory.Filter) async throws(Refusal) -> [DeliveryHistory.Entry] {
        for (name, value) in [("route", filter.route), ("project", filter.project), ("status", filter.status)] {
            try Self.refuseControlCharacters(value, name: name)
        }
        do {
            return try await log.list(filter)
        } catch {
            throw Self.storeUnavailable(error, logger: logger)
        }
    }

    /// The ping, whichever replica sent it; nil when no longer kept.
    func historyEntry(_ id: String) async throws(Refusal) -> DeliveryHistory.Entry? {
        try Self.refuseControlCharacters(id, name: "the delivery id")
        // This replica's own pings are fresher in memory than their copy in the store.
        if let entry = engine.history.entry(id) { return entry }
        do {
            return try await log.entry(id)
        } catch {
            throw Self.storeUnavailable(error, logger: logger)
        }
    }

    func delivery(_ id: String) async throws(Refusal) -> Components.Schemas.DeliveryRecord {
        guard let entry = try await historyEntry(id) else { throw Self.noDelivery(id) }
        return .init(entry)
    }

    func retry(_ id: String) async throws(Refusal) -> Components.Schemas.DeliveryRecord {
        guard let entry = try await historyEntry(id) else { throw Self.noDelivery(id) }
        guard let status = entry.report?.status, status == .dead || status == .failed else {
            throw Refusal(
                kind: .notRetryable, detail: "ping \(id) is \(entry.report?.status.rawValue ?? "pending"); only dead or failed pings are retried")
        }
        guard !entry.toDevice else {
            throw Refusal(kind: .notRetryable, detail: "ping \(id) went to one device, whose token is not kept; send it again with POST /admin/send")
        }
        let (project, pipeline) = try self.pipeline(entry.project)
        let name = Ping.routeName(entry.route)
        guard let route = pipeline.routes.routes.first(where: { $0.name == name }) else {
            throw Refusal(kind: .notFound, detail: "route '\(name)' is no longer configured for project '\(project)'")
        }
        // The project too: the pings' `sending ping to FCM` lines carry this line's request_id, not the project.
        logger.notice(
            "admin retry",
            metadata: [
                "retry_of": "\(id)", "project": "\(project)", "route": "\(entry.route)", "version": "\(entry.version.versionNumber)",
            ])
        // The route as configured now (a fix to it is why one retries), to the audience the ping went to; what the
        // version changed is not kept, so {{changedParameters}} is `*`.
        // An HTTP target's call is made again, with what the version changed fetched again.
        var ping: Ping
        if let message = route.targetMessage(for: entry.version, project: project, change: .notNeeded, audiences: []) {
            ping = Ping(route: entry.route, project: project, payload: .target(message), decision: entry.decision)
            ping = await described([ping], version: entry.version, project: project, pipeline: pipeline)[0]
        } else {
            var message = route.message(for: entry.version, project: project)
            if route.isChangeAware || route.waves != nil, let audience = entry.audience.flatMap(FCMMessage.Target.init) {
                message.target = audience
            }
            ping = Ping(route: entry.route, project: project, message: message, decision: entry.decision)
        }
        let batch = DeliveryBatch(
            version: entry.version, eventID: entry.eventID, origin: .retry, receivedAt: Date(), retryOf: id, validateOnly: entry.validateOnly)
        let reports = await engine.send([ping], batch: batch, plan: pipeline.send, logger: logger)
        return Self.record(reports[0], project: project, batch: batch, toDevice: false)
    }

    /// What a discard came to: done here, or passed to the replica that delivers the ping's project.
    enum Discarded {
        case here(Components.Schemas.DeliveryRecord)
        case passedOn(Components.Schemas.DeliveryRecord)
    }

    /// Gives up on a dead ping of an acknowledged event that waits for FCM: it is not tried again. With a shared
    /// store, a ping another replica delivers is discarded there: that replica is told through the store.
    func discard(_ id: String) async throws(Refusal) -> Discarded {
        guard let entry = try await historyEntry(id) else { throw Self.noDelivery(id) }
        let key = EventRecord.versionKey(project: entry.project, version: entry.version.versionNumber)
        let refusal = Refusal(
            kind: .notDiscardable,
            detail:
                "ping \(id) is \(entry.report?.status.rawValue ?? "pending"), and only the dead ping of a spooled event that waits for FCM can be discarded"
        )
        // A send or a retry is not an event: nothing waits for it.
        guard entry.report?.status == .dead, !entry.validateOnly, entry.origin != .send, entry.origin != .retry else { throw refusal }
        let metadata: Logger.Metadata = ["delivery_id": "\(id)", "route": "\(entry.route)", "version": "\(entry.version.versionNumber)"]
        if engine.discard(key: key, route: entry.route) {
            logger.notice("admin discard", metadata: metadata)
            return .here(.init(entry))
        }
        let passedOn: Bool
        do {
            passedOn = try await admission.discardElsewhere(project: entry.project, key: key, route: entry.route)
        } catch {
            throw Self.storeUnavailable(error, logger: logger)
        }
        guard passedOn else { throw refusal }
        logger.notice("admin discard passed to the replica that delivers the project", metadata: metadata)
        return .passedOn(.init(entry))
    }

    /// Forgets the versions the project's pings are compared against, here, on disk, in the shared store and on every
    /// replica (openapi.yaml, `DELETE /admin/projects/{project}/marks`).
    func resetMarks(_ requested: String) async throws(Refusal) -> Components.Schemas.MarksReset {
        let (project, _) = try pipeline(requested)
        do {
            try await admission.resetMarks(project)
        } catch {
            throw Self.storeUnavailable(error, logger: logger)
        }
        engine.resetMarks(project: project)
        marks?.reset(project, logger: logger)
        logger.notice("admin reset of the project's version marks", metadata: ["project": "\(project)"])
        return .init(status: .reset, project: project)
    }

    /// The shared store did not answer a read or a request of the admin API.
    static func storeUnavailable(_ error: any Error, logger: Logger) -> Refusal {
        Refusal(kind: .notReady, detail: "the relay's shared store did not answer; retry shortly", retryAfter: 5)
            .logged("the shared store did not answer the admin API", to: logger, ["error": "\(error)"])
    }
}
