import DeliveryEngine
import Logging

/// On this process's disk (`delivery.spoolDirectory`): an event that does not settle within its sender's wait is
/// written to the spool (a file, fsynced) before the 202, and delivered again after a crash or restart.
package struct SpoolAdmission: ThisProcessOnly {
    let engine: DeliveryEngine

    package init(engine: DeliveryEngine) { self.engine = engine }

    package func keep(_ delivery: RecentEvents.EventDelivery, logger: Logger) -> Kept {
        Kept.inEngine(delivery, engine: engine, logger: logger)
    }
}

extension Kept {
    /// Hands an undelivered event to the engine's spool (a directory, or the shared outbox).
    static func inEngine(_ delivery: RecentEvents.EventDelivery, engine: DeliveryEngine, logger: Logger) -> Kept {
        do {
            switch try engine.acknowledge(delivery) {
            case .spooled: return .kept
            case .settled(let reports): return .settled(reports)
            }
        } catch {
            logger.error("the event could not be spooled", metadata: ["error": "\(error)"])
            return .notKept
        }
    }
}
