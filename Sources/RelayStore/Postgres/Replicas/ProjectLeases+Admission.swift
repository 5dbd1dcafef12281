import DeliveryEngine
import Logging

/// The replicas sharing PostgreSQL: the outbox admits, the project's lease holder delivers.
extension ProjectLeases: Admission {
    package var keepsAdmitted: Bool { true }

    package func admit(_ record: EventRecord, window: Duration, logger: Logger) async throws(StoreError) -> Admitted {
        // Committed before anything else: from here on any replica delivers it, and a 202 means it is kept.
        let admission = try await admitToOutbox(record, window: window, logger: logger)
        switch admission {
        case .admitted(let row), .pending(let row):
            guard holds(record.project), await seeded(record) else { return .elsewhere }
            return .deliverHere(committed: true, row: row)
        case .settled(let reports): return .settled(reports)
        case .conflict(let key): return .conflict(key)
        }
    }

    /// Whether this replica may deliver the event itself, kept in the outbox already. A project taken with nothing
    /// pending is not swept at once (10,000 taken at a start would be 10,000 sweeps): its first event reads what the
    /// sweep would (``readTakenOver(_:)``). When a newer version is pending too, or the store does not answer, false:
    /// the sweep plans them together (the older ones stand down behind the newer), once the store answers.
    private func seeded(_ record: EventRecord) async -> Bool {
        let project = record.project
        do {
            guard let pending = try await readTakenOver(project) else { return true }
            if pending.contains(where: { $0.version.versionNumber > record.version.versionNumber }) {
                requestSweep(project)
                return false
            }
            caughtUp(project)
            return true
        } catch {
            failed(error, doing: "reading what FCM accepted before this replica took the project")
            requestSweep(project)
            return false
        }
    }

    package func pollClaim(_ project: String) -> PollClaim? { epoch(project).map { PollClaim(epoch: $0) } }

    package func admitPolled(_ record: EventRecord, claim: PollClaim, window: Duration, logger: Logger) async -> PolledAdmission {
        guard let epoch = claim.epoch else { return .leave }
        switch await admitPolled(record, epoch: epoch, window: window, logger: logger) {
        case .admitted(let row)?:
            guard await seeded(record) else { return .keptAlready }
            return .deliverHere(row: row)
        case .pending?:
            requestSweep(record.project)
            return .keptAlready
        case .settled?: return .settled
        case .conflict?, nil: return .leave
        }
    }

    /// Admitted events are in the outbox from the start: the engine only marks them as kept, or answers settled.
    package func keep(_ delivery: RecentEvents.EventDelivery, logger: Logger) -> Kept {
        Kept.inEngine(delivery, engine: engine, logger: logger)
    }

    package func discardElsewhere(project: String, key: String, route: String) async throws(StoreError) -> Bool {
        guard !holds(project) else { return false }
        try await store.requestDiscard(key: key, route: route)
        return true
    }

    /// The reset is durable before the answer (a generation in the store): the replicas told by `NOTIFY` apply it at
    /// once, and any that missed the notice at its next renewal (``applyResets(_:)``).
    package func resetMarks(_ project: String) async throws(StoreError) {
        let generation = try await store.resetRelayed(project: project)
        _ = noteReset(project, generation: generation)
        try await store.requestReset(project: project, generation: generation)
    }
}
