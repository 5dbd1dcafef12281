import DeliveryEngine
import FCMClient
import Foundation
import Logging
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
final class ProjectLeases: Service, Sendable {
    let store: PostgresStore
    let configuration: ConfigurationStore
    let engine: DeliveryEngine
    let planner: Planner
    let metrics: RelayMetrics
    let logger: Logger

    private struct State {
        /// Projects whose lease this replica holds, with the instant the claim counts until.
        var held: [String: ContinuousClock.Instant] = [:]
        var migrated = false
        /// The last round trip that succeeded, for readiness.
        var lastContact: ContinuousClock.Instant?
        var lastError: String?
        /// Projects whose outbox is to be swept.
        var toSweep: Set<String> = []
    }

    private let state = Locked(State())
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>

    init(store: PostgresStore, configuration: ConfigurationStore, engine: DeliveryEngine, planner: Planner, metrics: RelayMetrics, logger: Logger) {
        (self.store, self.configuration, self.engine, self.planner, self.metrics) = (store, configuration, engine, planner, metrics)
        var logger = logger
        logger[metadataKey: "source"] = "store"
        self.logger = logger
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    var lease: Duration { store.settings.lease }

    /// Whether this replica delivers the project's events now.
    func holds(_ project: String) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { ($0.held[project] ?? now) > now }
    }

    /// For readiness: the schema is in place and the database answered within the lease.
    var readiness: (ok: Bool, detail: String) {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard state.migrated else { return (false, "the schema is not in place yet: \(state.lastError ?? "connecting")") }
            guard let contact = state.lastContact, now - contact < lease else {
                return (false, "PostgreSQL has not answered for over \(lease): \(state.lastError ?? "no answer")")
            }
            let held = state.held.filter { $0.value > now }.keys.sorted()
            return (true, held.isEmpty ? "reachable; another replica delivers" : "reachable; delivering for \(held.joined(separator: ", "))")
        }
    }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.renewUntilCancelled() }
            group.addTask { await self.sweepUntilCancelled() }
            group.addTask { await self.listenUntilCancelled() }
            group.addTask { await self.listenForDiscardsUntilCancelled() }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        // The engine has stopped (it stops before this service): its hand-overs are queued. Once they are written,
        // another replica may take over at once; if the database does not take them in time, the leases expire instead.
        guard await store.flushBeforeStop(within: min(lease, .seconds(5))) else {
            logger.warning("outbox changes not written before the stop: leases left to expire, another replica takes over then")
            return
        }
        for project in state.withLock({ Array($0.held.keys) }) {
            do {
                try await store.release(Self.leaseName(project))
                logger.notice("project lease released", metadata: ["project": "\(project)"])
            } catch {
                logger.warning("project lease not released; another replica takes over when it expires", metadata: ["project": "\(project)"])
            }
        }
        state.withLock { $0.held = [:] }
        metrics.leasesHeld(0)
    }

    /// Commits the event to the outbox (or finds it there); a store that does not answer is a `503`, with nothing
    /// acknowledged.
    func admit(_ record: SpoolRecord, window: Duration, logger: Logger) async throws(Refusal) -> PostgresStore.Admission {
        do {
            let admission = try await store.admit(record, window: window, notify: !holds(record.project))
            contact()
            return admission
        } catch {
            failed(error, doing: "admitting an event")
            throw Refusal(kind: .notReady, detail: "the relay's shared store did not answer, so nothing was accepted; retry shortly", retryAfter: 5)
        }
    }

    static func leaseName(_ project: String) -> String { "project/\(project)" }

    // MARK: - Leases

    private func renewUntilCancelled() async {
        while !Task.isCancelled {
            if state.withLock({ $0.migrated }) {
                await renew()
            } else {
                await migrate()
            }
            try? await Task.sleep(for: state.withLock({ $0.migrated }) ? lease / 4 : .seconds(1))
        }
    }

    private func migrate() async {
        do {
            let applied = try await store.migrate()
            if !applied.isEmpty { logger.notice("database schema migrated", metadata: ["versions": "\(applied)"]) }
            contact()
            state.withLock { $0.migrated = true }
        } catch {
            failed(error, doing: "migrating the schema")
        }
    }

    private func renew() async {
        for project in configuration.current.projects.ids {
            guard !Task.isCancelled else { return }
            let sent = ContinuousClock.now
            do {
                let held = try await store.acquire(Self.leaseName(project), for: lease)
                contact()
                let was = state.withLock { state in
                    let was = state.held[project].map { $0 > sent } ?? false
                    state.held[project] = held ? sent + lease / 2 : nil
                    return was
                }
                if held, !was { logger.notice("project lease taken: this replica delivers its events", metadata: ["project": "\(project)"]) }
                if held { requestSweep(project) }
            } catch {
                failed(error, doing: "renewing the project's lease")
            }
        }
        standDownWhereLapsed()
        let now = ContinuousClock.now
        metrics.leasesHeld(state.withLock { $0.held.values.filter { $0 > now }.count })
    }

    /// Stops the deliveries of each project whose claim lapsed (another replica holds it, or it could not be renewed
    /// in time): the other replica delivers them from the outbox.
    private func standDownWhereLapsed() {
        let now = ContinuousClock.now
        let lapsed = state.withLock { state in
            let lapsed = state.held.filter { $0.value <= now }.map(\.key)
            for project in lapsed { state.held[project] = nil }
            return lapsed
        }
        for project in lapsed {
            let stopped = engine.standDown(project: project)
            logger.warning(
                "project lease lapsed: this replica stops delivering its events, which another replica delivers",
                metadata: ["project": "\(project)", "stopped": "\(stopped)"])
        }
    }

    // MARK: - The outbox

    /// Asks for a sweep of the project's outbox; requests made while one runs are served by one more sweep.
    func requestSweep(_ project: String) {
        state.withLock { _ = $0.toSweep.insert(project) }
        wake.yield()
    }

    private func sweepUntilCancelled() async {
        for await _ in wakes {
            guard !Task.isCancelled else { return }
            let projects = state.withLock { state in
                defer { state.toSweep = [] }
                return state.toSweep
            }
            for project in projects.sorted() { await sweep(project) }
            let settings = configuration.current.settings
            do {
                let pruned = try await store.prune(
                    window: settings.dedupWindow, keep: max(settings.historySize, settings.dedupMaxEvents), keepPings: settings.historySize)
                if pruned > 0 { logger.debug("settled events pruned", metadata: ["count": "\(pruned)"]) }
            } catch {
                failed(error, doing: "pruning settled events")
            }
        }
    }

    /// Starts the delivery of each event the project's outbox holds that this replica is not delivering already.
    private func sweep(_ project: String) async {
        guard holds(project) else { return }
        let records: [SpoolRecord]
        do {
            records = try await store.pending(project: project)
            contact()
        } catch {
            failed(error, doing: "reading the outbox")
            return
        }
        for record in records where !engine.knows(record) {
            guard holds(project), !Task.isCancelled else { return }
            var logger = logger
            logger[metadataKey: "event_id"] = "\(record.eventID ?? "-")"
            logger[metadataKey: "project"] = "\(record.project)"
            logger[metadataKey: "version"] = "\(record.version.versionNumber)"
            guard let plan = await configuration.plan(for: record, planner: planner, logger: logger) else { continue }
            logger.info("delivering an event from the outbox")
            _ = await engine.deliver(record, plan: plan, origin: .spool, wait: .zero, onDisk: true, logger: logger)
        }
    }

    /// Another replica's `NOTIFY` starts the delivery at once; the sweeps at each renewal cover what a dropped
    /// connection missed.
    private func listenUntilCancelled() async {
        while !Task.isCancelled {
            do {
                try await store.listen { project in self.requestSweep(project) }
            } catch {
                if !Task.isCancelled { logger.debug("listening for new events stopped", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// An operator's discard through another replica's admin API: the replica delivering the event discards it.
    private func listenForDiscardsUntilCancelled() async {
        while !Task.isCancelled {
            do {
                try await store.listenForDiscards { key, route in
                    guard self.engine.discard(key: key, route: route) else { return }
                    self.logger.notice("admin discard applied, asked through another replica", metadata: ["key": "\(key)", "route": "\(route)"])
                }
            } catch {
                if !Task.isCancelled { logger.debug("listening for discards stopped", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func contact() {
        state.withLock {
            $0.lastContact = ContinuousClock.now
            $0.lastError = nil
        }
    }

    private func failed(_ error: any Error, doing what: String) {
        state.withLock { $0.lastError = "\(error)" }
        logger.warning("PostgreSQL did not answer while \(what)", metadata: ["error": "\(error)"])
    }
}
