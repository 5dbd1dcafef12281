import DeliveryEngine
import Logging

/// The outbox of the projects this replica holds: swept when a lease is taken, when another replica's `NOTIFY` says it
/// admitted an event, and at each renewal; settled events are pruned after each round.
extension ProjectLeases {
    func sweepUntilCancelled() async {
        for await _ in wakes {
            guard !Task.isCancelled else { return }
            for project in takeSweepRequests().sorted() { await sweep(project) }
            let retention = host.retention
            do {
                let pruned = try await store.prune(window: retention.dedupWindow, keepPings: retention.historySize)
                if pruned > 0 { logger.debug("settled events pruned", metadata: ["count": "\(pruned)"]) }
            } catch {
                failed(error, doing: "pruning settled events")
            }
        }
    }

    /// Starts the delivery of each event the project's outbox holds that this replica is not delivering already,
    /// newest version first: where several versions wait for one audience (senders' retries after a database stall
    /// come in any order), only the newest is sent and the older ones end `superseded`.
    private func sweep(_ project: String) async {
        guard holds(project) else { return }
        let records: [EventRecord]
        let since: Int64?
        do {
            // Taken (again): the pending rows, then what FCM accepted under the previous holder (``readTakenOver(_:)``).
            let taken = try await readTakenOver(project)
            if let taken { records = taken } else { records = try await store.pending(project: project) }
            // What change-aware routes measure each event's change from: the newest version relayed on record.
            since = try await store.relayed(project: project)
            // Caught up only once everything is read: a failed read reads it all again at the next sweep.
            if taken != nil { caughtUp(project) }
            contact()
        } catch {
            failed(error, doing: "reading the outbox")
            return
        }
        var planned: [(record: EventRecord, plan: DeliveryPlan, context: Logger)] = []
        for record in records where !engine.knows(record) {
            var logger = logger
            logger[metadataKey: "event_id"] = "\(record.eventID ?? "-")"
            logger[metadataKey: "project"] = "\(record.project)"
            logger[metadataKey: "version"] = "\(record.version.versionNumber)"
            guard let plan = await host.plan(for: record, since: since, logger: logger) else { continue }
            planned.append((record, plan, logger))
        }
        // Newest first: an older version's ping to an audience a newer pending version pings too stands down.
        for (record, plan, logger) in DeliveryPlan.newestFirst(planned) {
            guard holds(project), !Task.isCancelled else { return }
            logger.info("delivering an event from the outbox")
            await engine.deliverKept(record, plan: plan, logger: logger)
        }
    }
}
