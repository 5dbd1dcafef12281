import Foundation
import Logging
import RelayCore

/// Starts the delivery of an accepted event and says how it stands within the answer's wait; used by the webhook
/// endpoints and by the spool's replay on start.
struct DeliveryService: Sendable {
    let runtime: RelayRuntime

    var recent: RecentEvents { runtime.recent }

    /// `onDisk`: the record comes from the spool (it was acknowledged before a restart).
    func deliver(
        _ record: SpoolRecord, origin: DeliveryLog.Origin = .webhook, wait: Duration? = nil, onDisk: Bool = false, logger: Logger
    ) async -> RecentEvents.Outcome {
        let configuration = runtime.configuration
        guard let pipeline = configuration.projects[record.project] else {
            logger.error("event dropped: its project is no longer configured", metadata: ["project": "\(record.project)"])
            return .settled([], duplicate: false)
        }
        let pings = pipeline.routes.pings(for: record.version, project: record.project)
        let batch = DeliveryBatch(version: record.version, eventID: record.eventID, origin: origin, receivedAt: record.receivedAt)
        return await recent.deliver(record, wait: wait ?? configuration.settings.answerWithin, onDisk: onDisk) { [logger] routes, control in
            // A spooled or parked event sends only the routes still due.
            let due = routes.map { routes in pings.filter { routes.contains($0.route) } } ?? pings
            return await pipeline.dispatcher.deliver(due, batch: batch, control: control, logger: logger)
        }
    }
}
