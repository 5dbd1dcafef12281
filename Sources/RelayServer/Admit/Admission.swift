import DeliveryEngine
import Logging
import RelayStore

/// Where an acknowledged event is kept and who delivers a project: this process alone (``ProcessAdmission``: its memory,
/// or its spool on disk, which the engine keeps), or the replicas that share PostgreSQL (``ProjectLeases``). The webhook
/// controller, catch-up polling and the admin API go through it, and never ask which one they have.
protocol Admission: Sendable {
    /// Whether an admitted event is already kept where a restart, or another replica, finds it (the shared outbox).
    var keepsAdmitted: Bool { get }

    /// A webhook's event.
    func admit(_ record: SpoolRecord, window: Duration, logger: Logger) async throws(Refusal) -> Admitted

    /// The claim under which this process polls `project` now; nil when another replica delivers it.
    func pollClaim(_ project: String) -> PollClaim?

    /// The newest version of `project` relayed by anyone: nil when nobody beyond this process keeps it.
    func relayed(_ project: String) async throws(StoreError) -> Int64?

    /// Tells everyone that `version` is the newest relayed (a poll adopted it).
    func noteRelayed(_ project: String, _ version: Int64) async

    /// A version a poll found, under the claim the poll started with.
    func admitPolled(_ record: SpoolRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission

    /// Each project this process starts delivering (a lease taken over); one reader (catch-up polling).
    var takeovers: AsyncStream<String> { get }

    /// Asks the process that delivers the event's project to discard a dead ping; false when no other process does.
    func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool

    /// Forgets the project's marks wherever they are shared, and tells every process to forget its own.
    func resetMarks(_ project: String) async throws(StoreError)
}

/// What admitting a webhook's event came to.
enum Admitted: Sendable, Equatable {
    /// This process delivers it; `committed`: it is already kept (in the shared outbox).
    case deliverHere(committed: Bool)
    /// Another process delivers it (it holds the project's lease); the event is kept.
    case elsewhere
    /// Its first delivery settled it: a duplicate, answered from those reports.
    case settled([DeliveryReport])
    /// Its id belongs to another event (`key`).
    case conflict(String)
}

/// The claim a poll runs under: with a shared store, the lease's epoch (a poll that outlived it admits nothing).
struct PollClaim: Sendable, Equatable {
    var epoch: Int64?
}

/// What admitting a polled version came to.
enum PolledAdmission: Sendable, Equatable {
    /// This process delivers it.
    case deliverHere
    /// A webhook's event for it waits in the outbox: the outbox's delivery sends it.
    case waitingInOutbox
    /// A webhook had announced it already.
    case settled
    /// Not this poll's to relay (its claim lapsed, or its id belongs to another event): the next poll decides.
    case leave
}

/// This process alone: every event it admits, it delivers; nothing is shared.
struct ProcessAdmission: Admission {
    var keepsAdmitted: Bool { false }
    func admit(_ record: SpoolRecord, window: Duration, logger: Logger) async throws(Refusal) -> Admitted { .deliverHere(committed: false) }
    func pollClaim(_ project: String) -> PollClaim? { PollClaim(epoch: nil) }
    func relayed(_ project: String) async throws(StoreError) -> Int64? { nil }
    func noteRelayed(_ project: String, _ version: Int64) async {}
    func admitPolled(_ record: SpoolRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission { .deliverHere }
    /// This process delivers every project from the start: it takes nothing over.
    var takeovers: AsyncStream<String> { AsyncStream { $0.finish() } }
    func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool { false }
    func resetMarks(_ project: String) async throws(StoreError) {}
}

/// The replicas sharing PostgreSQL: the outbox admits, the project's lease holder delivers.
extension ProjectLeases: Admission {
    var keepsAdmitted: Bool { true }

    func admit(_ record: SpoolRecord, window: Duration, logger: Logger) async throws(Refusal) -> Admitted {
        // Committed before anything else: from here on any replica delivers it, and a 202 means it is kept.
        let admission = try await admitToOutbox(record, window: window, logger: logger)
        switch admission {
        case .admitted, .pending: return holds(record.project) ? .deliverHere(committed: true) : .elsewhere
        case .settled(let reports): return .settled(reports)
        case .conflict(let key): return .conflict(key)
        }
    }

    func pollClaim(_ project: String) -> PollClaim? { epoch(project).map { PollClaim(epoch: $0) } }

    func admitPolled(_ record: SpoolRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission {
        guard let epoch = claim.epoch else { return .leave }
        switch await admitPolled(record, epoch: epoch, window: window, logger: logger) {
        case .admitted?: return .deliverHere
        case .pending?:
            requestSweep(record.project)
            return .waitingInOutbox
        case .settled?: return .settled
        case .conflict?, nil: return .leave
        }
    }

    func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool {
        guard !holds(project) else { return false }
        try await store.requestDiscard(key: key, route: route)
        return true
    }

    func resetMarks(_ project: String) async throws(StoreError) {
        try await store.resetRelayed(project: project)
        try await store.requestReset(project: project)
    }
}
