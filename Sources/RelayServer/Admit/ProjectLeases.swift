import DeliveryEngine
import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayStore
import ServiceLifecycle

/// With a shared store (`store.postgres`), which projects this replica delivers, and their outbox.
///
/// One replica at a time holds each project's lease, and only the holder delivers the project's events, runs its
/// quiet periods and waves, paces its FCM requests and polls Remote Config for it: every replica admits events into
/// the outbox, and the holder delivers them. A holder that dies stops renewing; another replica takes the lease once it
/// expires and delivers what the outbox still has. A graceful stop releases the leases once the engine has handed its
/// deliveries back to the outbox, so another replica takes over at once.
///
/// Two tasks: one renews (or tries to take) each configured project's lease every `lease / 4`, on its own so that no
/// slow sweep delays a renewal; the other delivers the outbox of the projects held, when a lease is taken, when
/// another replica's `NOTIFY` says it admitted an event, and at each renewal, and prunes settled events. A claim counts
/// locally for half the lease from before the statement that renewed it: a replica that cannot renew (the database is
/// away) stops its deliveries of the project well before another replica can take the lease over.
///
/// Fencing: every take-over raises the lease's epoch. Right before each FCM request of an event, ``mayStart(project:)``
/// checks the claim, and asks the database when its epoch has not been confirmed for a third of the lease; a poll's
/// admission carries the epoch it began under. A replica that was paused while another took over stands down before
/// it sends anything more (docs/replicas.md, fencing).
final class ProjectLeases: Service, DeliveryFence, Sendable {
    let store: PostgresStore
    let configuration: ConfigurationStore
    let engine: DeliveryEngine
    let planner: Planner
    let metrics: RelayMetrics
    let logger: Logger

    /// This replica's claim on a project's lease.
    struct Claim {
        /// The claim counts until then: half the lease from before the statement that renewed it.
        var until: ContinuousClock.Instant
        /// The lease's epoch when this replica took it: work decided under it is fenced by it.
        var epoch: Int64
        /// When the database last confirmed the epoch (the renewal's or a check's start).
        var confirmed: ContinuousClock.Instant
    }

    struct State {
        /// Projects whose lease this replica holds.
        var held: [String: Claim] = [:]
        var migrated = false
        /// The last round trip that succeeded, for readiness.
        var lastContact: ContinuousClock.Instant?
        var lastError: String?
        /// Projects whose outbox is to be swept.
        var toSweep: Set<String> = []
        /// Projects taken over since their last sweep: what FCM accepted for them is read from the shared history first.
        var toSeed: Set<String> = []
    }

    let state = NIOLockedValueBox(State())
    /// Each project whose lease this replica takes (catch-up polling polls it at once).
    let takeovers: AsyncStream<String>
    let tookOver: AsyncStream<String>.Continuation
    /// The newest version relayed per project here, forgotten when an operator resets a project's marks anywhere.
    let relayed: RelayedVersions
    let wake: AsyncStream<Void>.Continuation
    /// Sweep requests (ProjectLeases+Outbox.swift).
    let wakes: AsyncStream<Void>

    /// `RC_RELAY_TESTING_DISABLE_FENCING=1` switches fencing off, for the fault campaign's test that its checker catches
    /// a relay without it (Tests/interop/test_campaign.py). Never set it in production.
    let fencing: Bool

    init(
        store: PostgresStore, configuration: ConfigurationStore, engine: DeliveryEngine, planner: Planner, relayed: RelayedVersions,
        metrics: RelayMetrics, logger: Logger,
        fencing: Bool = ProcessInfo.processInfo.environment["RC_RELAY_TESTING_DISABLE_FENCING"] != "1"
    ) {
        (self.store, self.configuration, self.engine, self.planner, self.metrics) = (store, configuration, engine, planner, metrics)
        self.relayed = relayed
        (takeovers, tookOver) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(100))
        self.fencing = fencing
        var logger = logger
        logger[metadataKey: "source"] = "store"
        self.logger = logger
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var lease: Duration { store.settings.lease }

    /// Whether this replica delivers the project's events now.
    func holds(_ project: String) -> Bool {
        let now = ContinuousClock.now
        return state.withLockedValue { ($0.held[project]?.until ?? now) > now }
    }

    /// The epoch of the project's lease while this replica holds it.
    func epoch(_ project: String) -> Int64? {
        let now = ContinuousClock.now
        return state.withLockedValue { state in state.held[project].flatMap { $0.until > now ? $0.epoch : nil } }
    }

    /// For readiness: the schema is in place and the database answered within the lease.
    var readiness: (ok: Bool, detail: String) {
        let now = ContinuousClock.now
        return state.withLockedValue { state in
            guard state.migrated else { return (false, "the schema is not in place yet: \(state.lastError ?? "connecting")") }
            guard let contact = state.lastContact, now - contact < lease else {
                return (false, "PostgreSQL has not answered for over \(lease): \(state.lastError ?? "no answer")")
            }
            let held = state.held.filter { $0.value.until > now }.keys.sorted()
            return (true, held.isEmpty ? "reachable; another replica delivers" : "reachable; delivering for \(held.joined(separator: ", "))")
        }
    }

    func run() async throws {
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
        guard await store.flushBeforeStop(within: min(lease, .seconds(5))) else {
            logger.warning("outbox changes not written before the stop: leases left to expire, another replica takes over then")
            return
        }
        for project in state.withLockedValue({ Array($0.held.keys) }) {
            do {
                try await store.release(Self.leaseName(project))
                logger.notice("project lease released", metadata: ["project": "\(project)"])
            } catch {
                logger.warning("project lease not released; another replica takes over when it expires", metadata: ["project": "\(project)"])
            }
        }
        state.withLockedValue { $0.held = [:] }
        metrics.leasesHeld(0)
    }

    /// Commits the event to the outbox (or finds it there); a store that does not answer is a `503`, with nothing
    /// acknowledged.
    func admitToOutbox(_ record: SpoolRecord, window: Duration, logger: Logger) async throws(Refusal) -> PostgresStore.Admission {
        do {
            let admission = try await store.admit(record, window: window, notify: !holds(record.project))
            contact()
            return admission
        } catch {
            failed(error, doing: "admitting an event")
            throw Refusal(kind: .notReady, detail: "the relay's shared store did not answer, so nothing was accepted; retry shortly", retryAfter: 5)
        }
    }

    /// A poll's admission, fenced: refused (and this replica stands down) when the lease was taken over since the
    /// poll began. Nil when this replica does not hold the project, or the store did not answer.
    func admitPolled(_ record: SpoolRecord, epoch: Int64, window: Duration, logger: Logger) async -> PostgresStore.Admission? {
        do {
            let admission =
                fencing
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
    func relayed(_ project: String) async throws(StoreError) -> Int64? {
        let version = try await store.relayed(project: project)
        contact()
        return version
    }

    /// Notes a version relayed or adopted in the shared store (failures are logged: the settlement notes it too).
    func noteRelayed(_ project: String, _ version: Int64) async {
        do {
            try await store.noteRelayed(project: project, version: version)
        } catch {
            failed(error, doing: "noting the version relayed")
        }
    }

    static func leaseName(_ project: String) -> String { "project/\(project)" }

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

    /// An operator's reset of the project's marks, asked through any replica: this one forgets them too.
    func resetApplied(_ project: String) {
        engine.resetMarks(project: project)
        relayed.reset(project, logger: logger)
        logger.notice("admin reset of the project's version marks applied", metadata: ["project": "\(project)"])
    }

    func contact() {
        state.withLockedValue {
            $0.lastContact = ContinuousClock.now
            $0.lastError = nil
        }
    }

    func failed(_ error: any Error, doing what: String) {
        state.withLockedValue { $0.lastError = "\(error)" }
        logger.warning("PostgreSQL did not answer while \(what)", metadata: ["error": "\(error)"])
    }
}
