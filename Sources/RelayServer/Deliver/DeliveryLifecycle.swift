import Foundation
import Logging
import ServiceLifecycle

/// Replays the spool on start; on SIGTERM or SIGINT, gives deliveries under way `grace` to settle, then spools the
/// rest (or, with no spool, logs each as lost).
struct DeliveryLifecycle: Service {
    let service: DeliveryService
    let grace: Duration
    let logger: Logger

    func run() async throws {
        if let spool = service.recent.spool {
            let pending = spool.pending()
            if !pending.isEmpty { logger.notice("replaying spooled events", metadata: ["count": "\(pending.count)"]) }
            for record in pending {
                var logger = logger
                logger[metadataKey: "event_id"] = "\(record.eventID ?? "-")"
                logger[metadataKey: "project"] = "\(record.project)"
                logger[metadataKey: "version"] = "\(record.version.versionNumber)"
                _ = await service.deliver(record, origin: .spool, wait: .zero, logger: logger)
            }
        }
        try? await gracefulShutdown()
        let left = await service.recent.drain(within: grace)
        for record in left {
            var logger = logger
            logger[metadataKey: "event_id"] = "\(record.eventID ?? "-")"
            logger[metadataKey: "version"] = "\(record.version.versionNumber)"
            if let spool = service.recent.spool, (try? spool.write(record)) != nil {
                logger.notice("delivery unfinished at shutdown: spooled for the next start")
            } else {
                logger.error("delivery unfinished at shutdown and not spooled: lost unless the sender retries")
            }
        }
    }
}
