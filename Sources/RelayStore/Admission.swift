import DeliveryEngine
import Logging

/// Where an acknowledged event is kept and who delivers a project: the store's seam. Three implementations sit side by
/// side in this target, one per storage: ``MemoryAdmission`` (this process, nothing kept), ``SpoolAdmission`` (in
/// `Spool/`: this process, events kept on its disk) and ``ProjectLeases`` (in `Postgres/Replicas/`: the replicas that
/// share a database, with the SQL in `Postgres/`). Each is built from values and the small protocols beside this one
/// (``StoreHost``, ``LeaseMetrics``), fails with ``StoreError``, and keeps its time on the engine's `DeliveryClock`.
/// RelayServer wires one (`Admit/Storage.swift`); its event path, catch-up polling and the admin API go through
/// it and never ask which one they have; no file outside `Admit/`, the configuration and `RelayStore` names a storage
/// (Tests/interop/test_architecture.py).
package protocol Admission: Sendable {
    /// Whether an admitted event is already kept where a restart, or another replica, finds it.
    var keepsAdmitted: Bool { get }

    /// A shared store's readiness (reachable, and its schema in place); nil when nothing is shared.
    var readiness: (ok: Bool, detail: String)? { get }

    /// A webhook's event; throws when the store did not answer (nothing was kept).
    func admit(_ record: EventRecord, window: Duration, logger: Logger) async throws(StoreError) -> Admitted

    /// The claim under which this process polls `project` now; nil when another replica delivers it.
    func pollClaim(_ project: String) -> PollClaim?

    /// The newest version of `project` relayed by anyone: nil when nobody beyond this process keeps it.
    func relayed(_ project: String) async throws(StoreError) -> Int64?

    /// Tells everyone that `version` is the newest relayed (a poll adopted it).
    func noteRelayed(_ project: String, _ version: Int64) async

    /// A version a poll found, under the claim the poll started with.
    func admitPolled(_ record: EventRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission

    /// Keeps a delivery that did not settle within its wait, so that the sender may be told 202: it survives a restart.
    func keep(_ delivery: RecentEvents.EventDelivery, logger: Logger) -> Kept

    /// Each project this process starts delivering (a lease taken over); one reader (catch-up polling).
    var takeovers: AsyncStream<String> { get }

    /// Asks the process that delivers the event's project to discard a dead ping; false when no other process does.
    func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool

    /// Forgets the project's marks wherever they are shared, and tells every process to forget its own.
    func resetMarks(_ project: String) async throws(StoreError)
}

/// What admitting a webhook's event came to.
package enum Admitted: Sendable, Equatable {
    /// This process delivers it; `committed`: it is already kept (in the shared outbox, as the row `row`).
    case deliverHere(committed: Bool, row: Int64? = nil)
    /// Another process delivers it (the one that holds the project now); the event is kept.
    case elsewhere
    /// Its first delivery settled it: a duplicate, answered from those reports.
    case settled([DeliveryReport])
    /// Its id belongs to another event (`key`).
    case conflict(String)

    /// As the `admit` span's `rc_relay.admission` attribute says it.
    package var name: String {
        switch self {
        case .deliverHere: "deliver here"
        case .elsewhere: "elsewhere"
        case .settled: "duplicate"
        case .conflict: "conflict"
        }
    }
}

/// The claim a poll runs under: with a shared store, the epoch of the project's hold (a poll that outlived it admits
/// nothing).
package struct PollClaim: Sendable, Equatable {
    package var epoch: Int64?

    package init(epoch: Int64?) { self.epoch = epoch }
}

/// What admitting a polled version came to.
package enum PolledAdmission: Sendable, Equatable {
    /// This process delivers it (kept in the shared outbox as the row `row`, if one is shared).
    case deliverHere(row: Int64? = nil)
    /// A webhook's event for it is kept already, with what of it was sent: that event's delivery sends the rest.
    case keptAlready
    /// A webhook had announced it already.
    case settled
    /// Not this poll's to relay (its claim lapsed, or its id belongs to another event): the next poll decides.
    case leave
}

/// What keeping an undelivered event came to.
package enum Kept: Sendable {
    /// It is kept: the sender is told 202, and its delivery goes on.
    case kept
    /// It settled first: the sender is answered with the outcome.
    case settled([DeliveryReport])
    /// Nothing keeps it: the sender is told to retry and join the delivery under way.
    case notKept
}
