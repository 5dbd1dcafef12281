import Foundation
import Logging
import ServiceLifecycle

/// Replays the spool on start (files that are not an event are moved aside, never trapped on); on SIGTERM or SIGINT,
/// gives deliveries under way `grace` to settle, then hands the rest over to the spool (or, with no spool, logs each
/// as left to its sender's retry).
struct DeliveryLifecycle: Service {
    let service: DeliveryService
    let grace: Duration
    let logger: Logger

    func run() async throws {
        if let spool = service.recent.spool {
            let recovery = spool.recover()
            for (file, reason) in recovery.quarantined {
                logger.error("spool file moved to quarantine/: it is not an event", metadata: ["file": "\(file)", "reason": "\(reason)"])
                service.runtime.metrics.spoolQuarantined.increment()
            }
            if recovery.temporaryFilesRemoved > 0 {
                logger.notice("removed unfinished spool writes left by a crash", metadata: ["count": "\(recovery.temporaryFilesRemoved)"])
            }
            if !recovery.records.isEmpty { logger.notice("replaying spooled events", metadata: ["count": "\(recovery.records.count)"]) }
            for record in recovery.records {
                var logger = logger
                logger[metadataKey: "event_id"] = "\(record.eventID ?? "-")"
                logger[metadataKey: "project"] = "\(record.project)"
                logger[metadataKey: "version"] = "\(record.version.versionNumber)"
                _ = await service.deliver(record, origin: .spool, wait: .zero, onDisk: true, logger: logger)
            }
        }
        try? await gracefulShutdown()
        for ended in await service.recent.drain(within: grace) {
            switch ended {
            case .settled:
                continue
            case .spooled(let record):
                logger.notice("delivery unfinished at shutdown: spooled for the next start", metadata: metadata(record))
            case .lost(let record):
                logger.error("delivery unfinished at shutdown and not spooled: lost unless the sender retries", metadata: metadata(record))
            }
        }
    }

    private func metadata(_ record: SpoolRecord) -> Logger.Metadata {
        ["event_id": "\(record.eventID ?? "-")", "version": "\(record.version.versionNumber)", "routes": "\(record.routes?.joined(separator: ",") ?? "all")"]
    }
}
