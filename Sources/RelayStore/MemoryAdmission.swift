import DeliveryEngine
import Logging

/// This process alone: every event it admits, it delivers; nothing is shared with another process. What differs
/// between ``MemoryAdmission`` and ``SpoolAdmission`` is only whether an undelivered event can be kept.
package protocol ThisProcessOnly: Admission {}

extension ThisProcessOnly {
    package var keepsAdmitted: Bool { false }
    package var readiness: (ok: Bool, detail: String)? { nil }
    package func admit(_ record: EventRecord, window: Duration, logger: Logger) async throws(StoreError) -> Admitted {
        .deliverHere(committed: false)
    }
    package func pollClaim(_ project: String) -> PollClaim? { PollClaim(epoch: nil) }
    package func relayed(_ project: String) async throws(StoreError) -> Int64? { nil }
    package func noteRelayed(_ project: String, _ version: Int64) async {}
    package func admitPolled(_ record: EventRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission {
        .deliverHere()
    }
    /// This process delivers every project from the start: it takes nothing over.
    package var takeovers: AsyncStream<String> { AsyncStream { $0.finish() } }
    package func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool { false }
    package func resetMarks(_ project: String) async throws(StoreError) {}
}

/// In memory (no `delivery.spoolDirectory`, no shared store): an event is delivered while its sender waits, and one
/// that does not settle within the wait is not kept: the sender is told to retry and join the delivery under way.
package struct MemoryAdmission: ThisProcessOnly {
    package init() {}

    package func keep(_ delivery: RecentEvents.EventDelivery, logger: Logger) -> Kept { .notKept }
}
