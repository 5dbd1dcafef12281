import Foundation
import Logging
import RelayCore

/// Starts the delivery of an accepted event and says how it stands within the answer's wait; used by the webhook
/// endpoints and by the spool's replay on start.
struct DeliveryService: Sendable {
    let runtime: RelayRuntime

    var recent: RecentEvents { runtime.recent }

    func deliver(_ record: SpoolRecord, origin: DeliveryLog.Origin = .webhook, wait: Duration? = nil, logger: Logger) async -> RecentEvents.Outcome {
        let configuration = runtime.configuration
        guard let pipeline = configuration.projects[record.project] else {
            logger.error("event dropped: its project is no longer configured", metadata: ["project": "\(record.project)"])
            return .settled([], duplicate: false)
        }
        let pings = pipeline.routes.pings(for: record.version, project: record.project)
        let batch = DeliveryBatch(version: record.version, eventID: record.eventID, origin: origin, receivedAt: record.receivedAt)
        return await recent.deliver(record, wait: wait ?? configuration.settings.answerWithin) { [logger] in
            await pipeline.dispatcher.deliver(pings, batch: batch, logger: logger)
        }
    }
}
