import Foundation
import Logging
import RelayCore

/// Starts the delivery of an accepted event and says how it stands within the answer's wait; used by the webhook
/// endpoints and by the spool's replay on start.
struct DeliveryService: Sendable {
    let projects: ProjectDirectory
    let recent: RecentEvents
    let answerWithin: Duration

    func deliver(_ record: SpoolRecord, wait: Duration? = nil, logger: Logger) async -> RecentEvents.Outcome {
        guard let pipeline = projects[record.project] else {
            logger.error("event dropped: its project is no longer configured", metadata: ["project": "\(record.project)"])
            return .settled([], duplicate: false)
        }
        let pings = pipeline.routes.pings(for: record.version, project: record.project)
        let version = record.version.versionNumber
        return await recent.deliver(record, wait: wait ?? answerWithin) { [logger] in
            await pipeline.dispatcher.deliver(pings, version: version, logger: logger)
        }
    }
}
