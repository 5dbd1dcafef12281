import DeliveryEngine
import Logging
import RelayStore

/// This process alone: every event it admits, it delivers; nothing is shared with another process. What differs
/// between ``MemoryAdmission`` and ``SpoolAdmission`` is only whether an undelivered event can be kept.
protocol ThisProcessOnly: Admission {}

extension ThisProcessOnly {
    var keepsAdmitted: Bool { false }
    var readiness: (ok: Bool, detail: String)? { nil }
    func admit(_ record: EventRecord, window: Duration, logger: Logger) async throws(Refusal) -> Admitted { .deliverHere(committed: false) }
    func pollClaim(_ project: String) -> PollClaim? { PollClaim(epoch: nil) }
    func relayed(_ project: String) async throws(StoreError) -> Int64? { nil }
    func noteRelayed(_ project: String, _ version: Int64) async {}
    func admitPolled(_ record: EventRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission { .deliverHere() }
    /// This process delivers every project from the start: it takes nothing over.
    var takeovers: AsyncStream<String> { AsyncStream { $0.finish() } }
    func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool { false }
    func resetMarks(_ project: String) async throws(StoreError) {}
}

/// In memory (no `delivery.spoolDirectory`, no shared store): an event is delivered while its sender waits, and one
/// that does not settle within the wait is not kept: the sender is told to retry and join the delivery under way.
struct MemoryAdmission: ThisProcessOnly {
    func keep(_ delivery: RecentEvents.EventDelivery, logger: Logger) -> Kept { .notKept }
}
