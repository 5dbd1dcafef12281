import DeliveryEngine
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// With a shared store (`store.postgres`), which projects this replica delivers, and their outbox.
///
/// One replica at a time holds each project's lease, and only the holder delivers the project's events, runs its
/// quiet periods and waves, paces its FCM requests and polls Remote Config for it: every replica admits events into
/// the outbox, and the holder delivers them. A holder that dies stops renewing; another replica takes the lease once it
/// expires and delivers what the outbox still has. A graceful stop releases the leases once the engine has handed its
/// deliveries back to the outbox, so another replica takes over at once.
///
/// Two tasks: one renews this replica's heartbeat every `lease / 4` (one row, which every lease it holds counts on), and
/// takes the configured projects' free leases when there may be any, on its own so that no slow sweep delays a
/// renewal; the other delivers the outbox of the projects held, when a lease is taken with events pending, when
/// another replica's `NOTIFY` says it admitted an event, and when a renewal finds events pending, and prunes settled
/// events. A claim counts locally for half the lease from before the statement that renewed it: a replica that cannot
/// renew (the database is away) stops its deliveries of the project well before another replica can take the lease
/// over.
///
/// Fencing is ``LeaseClaims``', which the engine asks before every request.
package final class ProjectLeases: Service, Sendable {
    let store: PostgresStore
    let claims: LeaseClaims
    /// The configuration in force, the planner and the marks outside the engine: the relay's (RelayServer wires them).
    let host: any StoreHost
    let engine: DeliveryEngine
    let metrics: any LeaseMetrics
    let logger: Logger

    /// Each project whose lease this replica takes (catch-up polling polls it at once).
    package let takeovers: AsyncStream<String>
    let tookOver: AsyncStream<String>.Continuation
    let wake: AsyncStream<Void>.Continuation
    /// Sweep requests (ProjectLeases+Outbox.swift).
    let wakes: AsyncStream<Void>

    package init(store: PostgresStore, claims: LeaseClaims, host: any StoreHost, engine: DeliveryEngine) {
        (self.store, self.claims, self.host, self.engine) = (store, claims, host, engine)
        (metrics, logger) = (claims.metrics, claims.logger)
        (takeovers, tookOver) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(100))
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var state: NIOLockedValueBox<LeaseClaims.State> { claims.state }
    var planted: PlantedBugs { claims.planted }
    var lease: Duration { claims.lease }
    static func leaseName(_ project: String) -> String { LeaseClaims.leaseName(project) }
    func holds(_ project: String) -> Bool { claims.holds(project) }
    func epoch(_ project: String) -> Int64? { claims.epoch(project) }
    package var readiness: (ok: Bool, detail: String)? { claims.readiness }
    func contact() { claims.contact() }
    func failed(_ error: any Error, doing what: String) { claims.failed(error, doing: what) }

    package func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.renewUntilCancelled() }
            group.addTask { await self.sweepUntilCancelled() }
            group.addTask { await self.listenUntilCancelled() }
            group.addTask { await self.listenForDiscardsUntilCancelled() }
            group.addTask { await self.listenForResetsUntilCancelled() }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        // The engine has stopped (it stops before this service): its hand-overs are queued. Once they are written,
        // another replica may take over at once; if the database does not take them in time, the leases expire instead.
        guard await store.flushBeforeStop(within: store.flushBound) else {
            logger.warning("outbox changes not written before the stop: leases left to expire, another replica takes over then")
            return
        }
        let held = state.withLockedValue { $0.held.keys.sorted() }
        do {
            // One statement for every lease, whatever their number.
            try await store.release(held.map(Self.leaseName))
            for project in held { logger.notice("project lease released", metadata: ["project": "\(project)"]) }
        } catch {
            logger.warning(
                "project leases not released; another replica takes over when this replica's heartbeat expires",
                metadata: ["projects": "\(held.count)"])
        }
        state.withLockedValue { $0.held = [:] }
        metrics.leasesHeld(0)
    }

    /// Commits the event to the outbox (or finds it there); a store that does not answer throws, with nothing
    /// acknowledged (the relay answers `503`).
    func admitToOutbox(_ record: EventRecord, window: Duration, logger: Logger) async throws(StoreError) -> PostgresStore.OutboxAdmission {
        do {
            let admission = try await store.admit(record, window: window, notify: !holds(record.project))
            contact()
            return admission
        } catch {
            failed(error, doing: "admitting an event")
            throw error
        }
    }

    /// A poll's admission, fenced: refused (and this replica stands down) when the lease was taken over since the
    /// poll began. Nil when this replica does not hold the project, or the store did not answer.
    func admitPolled(_ record: EventRecord, epoch: Int64, window: Duration, logger: Logger) async -> PostgresStore.OutboxAdmission? {
        do {
            let admission =
                !planted.contains(.pollEpoch)
                ? try await store.admit(record, window: window, lease: Self.leaseName(record.project), epoch: epoch)
                : try await store.admit(record, window: window, notify: false)
            contact()
            return admission
        } catch {
            if case .leaseLost = error {
                fenced(record.project, epoch: epoch)
            } else {
                failed(error, doing: "admitting a polled version")
            }
            return nil
        }
    }

    /// The newest version relayed for the project by any replica (nil: none on record); throws when the store does not
    /// answer.
    package func relayed(_ project: String) async throws(StoreError) -> Int64? {
        if planted.contains(.sharedMark) { return nil }
        let version = try await store.relayed(project: project)
        contact()
        return version
    }

    /// Notes a version relayed or adopted in the shared store (failures are logged: the settlement notes it too).
    package func noteRelayed(_ project: String, _ version: Int64) async {
        do {
            try await store.noteRelayed(project: project, version: version)
        } catch {
            failed(error, doing: "noting the version relayed")
        }
    }

    // MARK: - The outbox (ProjectLeases+Outbox.swift)

    /// Asks for a sweep of the project's outbox; requests made while one runs are served by one more sweep.
    func requestSweep(_ project: String) {
        state.withLockedValue { _ = $0.toSweep.insert(project) }
        wake.yield()
    }

    /// The projects whose sweep was asked for since the last call.
    func takeSweepRequests() -> Set<String> {
        state.withLockedValue { state in
            defer { state.toSweep = [] }
            return state.toSweep
        }
    }

    /// Whether the project's lease was taken since its last sweep (what FCM accepted before is to be read first).
    func wasTakenOver(_ project: String) -> Bool { state.withLockedValue { $0.toSeed.contains(project) } }

    /// The project's sweep has read what FCM accepted before it was taken.
    func caughtUp(_ project: String) { state.withLockedValue { _ = $0.toSeed.remove(project) } }

    /// A project taken (again) since its last sweep: this replica's own progress still queued is written first (a
    /// hand-over at a stand-down while the database was away), so what FCM accepted before is not sent again; then its
    /// pending rows are read, and what FCM accepted under the previous holder, in that order
    /// (``PostgresStore/takeOverRead(project:between:)``), noted in the engine so no older version follows it. Returns
    /// the pending rows; nil when the project was not taken over. The caller marks it ``caughtUp(_:)``.
    func readTakenOver(_ project: String) async throws(StoreError) -> [EventRecord]? {
        guard wasTakenOver(project) else { return nil }
        _ = await store.flush(within: lease / 2)
        let read = try await store.takeOverRead(project: project)
        engine.noteAccepted(read.accepted)
        return read.pending
    }

    /// Notes that the project's marks were reset to `generation` here; false when this replica had applied it already.
    func noteReset(_ project: String, generation: Int64?) -> Bool {
        guard let generation else { return true }
        return state.withLockedValue { state in
            var resets = state.resets ?? [:]
            defer { state.resets = resets }
            guard generation > resets[project] ?? 0 else { return false }
            resets[project] = generation
            return true
        }
    }

    /// Applies the resets of the projects' marks this replica missed (a notice lost while its listener reconnected):
    /// one statement per renewal round. The first read only notes where each project stands.
    func applyResets(_ projects: [String]) async {
        let configured = Set(projects)
        let generations: [String: Int64]
        do {
            generations = try await store.resetGenerations().filter { configured.contains($0.key) }
        } catch {
            return  // the next round reads them
        }
        let missed = state.withLockedValue { state -> [String] in
            guard let seen = state.resets else {
                state.resets = generations
                return []
            }
            return generations.filter { $0.value > seen[$0.key] ?? 0 }.map(\.key).sorted()
        }
        for project in missed where noteReset(project, generation: generations[project]) {
            resetApplied(project)
        }
    }

    /// An operator's reset of the project's marks, asked through any replica: this one forgets them too.
    func resetApplied(_ project: String) {
        store.marksPace.withLockedValue { $0.forget(project) }
        engine.resetMarks(project: project)
        host.marksReset(project, logger: logger)
        logger.notice("admin reset of the project's version marks applied", metadata: ["project": "\(project)"])
    }
}
