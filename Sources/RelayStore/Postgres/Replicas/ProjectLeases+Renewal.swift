import DeliveryEngine
import Logging
import NIOConcurrencyHelpers

/// Renewing the leases in one statement, and standing a project down when its lease is lost.
extension ProjectLeases {
    // MARK: - Leases

    func renewUntilCancelled() async {
        while !Task.isCancelled {
            if state.withLockedValue({ $0.migrated }) {
                await renew()
            } else {
                await migrate()
            }
            // On the engine's clock, as the claims' bounds are: a test moves both together.
            await claims.clock.sleep(for: state.withLockedValue({ $0.migrated }) ? lease / 4 : .seconds(1))
        }
    }

    func migrate() async {
        do {
            let applied = try await store.migrate()
            if !applied.isEmpty { logger.notice("database schema migrated", metadata: ["versions": "\(applied)"]) }
            contact()
            state.withLockedValue { $0.migrated = true }
        } catch {
            failed(error, doing: "migrating the schema")
        }
    }

    /// One renewal round. Idle, it is one statement for all the projects: the replica's heartbeat, which every lease it
    /// holds counts on (nobody takes a lease from a replica whose heartbeat stands). Leases are taken, in one
    /// transaction whatever their number, only when there may be something to take: at the start, when a lease was
    /// freed or a replica's heartbeat expired somewhere, when the projects configured changed, or when a claim of this
    /// replica's lapsed or its heartbeat was found expired.
    func renew() async {
        let projects = host.projects
        let sent = claims.now
        let beat: PostgresStore.Heartbeat
        do {
            beat = try await store.beat(for: lease)
            contact()
        } catch {
            failed(error, doing: "renewing the projects' leases")
            standDownWhereLapsed()
            return
        }
        let renewed = state.withLockedValue { state -> Bool in
            guard beat.alive, !beat.somethingToTake, !state.takeAgain, let last = state.lastTake, last.frees == beat.frees,
                last.projects == projects, state.held.values.allSatisfy({ $0.until > sent })
            else { return false }
            // Nobody took a lease of this replica's while its heartbeat stood: every claim counts for half a lease more.
            for index in state.held.values.indices { state.held.values[index].renewed(at: sent, lease: lease) }
            return true
        }
        if !beat.alive {
            // Another replica found this heartbeat expired and freed its leases (its claims lapsed here before that
            // could happen): none counts until the take says which are still this replica's.
            let suspended = state.withLockedValue { state in
                defer { state.held = [:] }
                return Array(state.held.keys)
            }
            for project in suspended { _ = engine.standDown(project: project) }
            await take(projects, frees: beat.frees, sent: sent, suspended: suspended)
        } else if !renewed {
            await take(projects, frees: beat.frees, sent: sent)
        }
        // The safety net for a notice lost on the way: of the projects held, those with anything pending, in one
        // statement (a project taken with nothing pending is asked about from then on, so its first event is found).
        let holding = state.withLockedValue { Array($0.held.keys) }
        do {
            for project in try await store.projectsWithPending(holding).sorted() { requestSweep(project) }
        } catch {
            failed(error, doing: "finding the projects with events to deliver")
        }
        wake.yield()  // the sweeper's round, with nothing to sweep, still prunes (one statement)
        standDownWhereLapsed()
        await applyResets(projects)
        let now = claims.now
        metrics.leasesHeld(state.withLockedValue { $0.held.values.filter { $0.until > now }.count })
    }

    /// Takes every free lease of `projects` and renews the heartbeat (one transaction), then notes what was taken and
    /// lost. A project just taken is swept only if it has an event pending (one statement for all of them); the others
    /// read what FCM accepted under the previous holder when their first event comes (``readTakenOver(_:)``).
    private func take(_ projects: [String], frees: Int64, sent: LeaseClaims.Instant, suspended: [String] = []) async {
        let held: [String: Int64]
        do {
            held = try await store.renew(projects.map(Self.leaseName), for: lease, freeingOthers: true)
            contact()
        } catch {
            failed(error, doing: "taking the projects' leases")
            state.withLockedValue { $0.takeAgain = true }
            standDownWhereLapsed()
            return
        }
        var taken: [String] = []
        var retaken: [String] = []
        var lost: [String] = []
        state.withLockedValue { state in
            state.takeAgain = false
            state.lastTake = (frees, projects)
            for project in projects {
                let was = state.held[project]
                guard let epoch = held[Self.leaseName(project)] else {
                    // Held a moment ago (the claim may have lapsed meanwhile: this replica was paused), another's now.
                    if state.held.removeValue(forKey: project) != nil { lost.append(project) }
                    continue
                }
                if let was, was.epoch == epoch, was.until > sent {
                    // Renewed.
                } else {
                    taken.append(project)
                    if was != nil { retaken.append(project) }
                    state.toSeed.insert(project)
                }
                state.held[project] = LeaseClaims.Claim(until: sent + lease / 2, epoch: epoch, confirmed: sent)
            }
            // A project no longer configured: its lease was freed by the take.
            let configured = Set(projects)
            for project in state.held.keys where !configured.contains(project) {
                state.held[project] = nil
                lost.append(project)
            }
            // Held before this replica's heartbeat was found expired, and another's now.
            lost += suspended.filter { held[Self.leaseName($0)] == nil }
        }
        // Another replica holds it now (a claim that lapsed while this one was paused): nothing more is sent here.
        standDown(lost, reason: "taken_over", "project lease lost to another replica: this replica stops delivering its events")
        // Whatever an earlier claim of this replica's left running was decided under an older epoch.
        for project in retaken { _ = engine.standDown(project: project) }
        for project in taken {
            logger.notice(
                "project lease taken: this replica delivers its events",
                metadata: ["project": "\(project)", "epoch": "\(held[Self.leaseName(project)] ?? 0)"])
        }
        for project in taken { tookOver.yield(project) }
        guard !taken.isEmpty else { return }
        do {
            for project in try await store.projectsWithPendingAnywhere(taken).sorted() { requestSweep(project) }
        } catch {
            // Swept whole, each on its own: what the statement would have told.
            failed(error, doing: "finding the projects taken with events to deliver")
            for project in taken { requestSweep(project) }
        }
    }

    /// Stops the deliveries of each project whose claim lapsed (another replica holds it, or it could not be renewed
    /// in time): the other replica delivers them from the outbox.
    func standDownWhereLapsed() {
        guard !planted.contains(.lapseCheck) else { return }
        let now = claims.now
        let lapsed = state.withLockedValue { state in
            let lapsed = state.held.filter { $0.value.until <= now }.map(\.key)
            for project in lapsed { state.held[project] = nil }
            // The lease may still be this replica's in the database: the next round reads which it holds.
            if !lapsed.isEmpty { state.takeAgain = true }
            return lapsed
        }
        standDown(lapsed, reason: "lapsed", "project lease lapsed: this replica stops delivering its events, which another replica delivers")
    }

    /// Stops the projects' deliveries here (each hands what is still due back to the outbox), counts and logs why.
    func standDown(_ projects: [String], reason: String, _ message: Logger.Message, epoch: Int64? = nil) {
        for project in projects {
            let stopped = engine.standDown(project: project)
            metrics.leaseStandDown(project: project, reason: reason)
            var metadata: Logger.Metadata = ["project": "\(project)", "stopped": "\(stopped)"]
            if let epoch { metadata["epoch"] = "\(epoch)" }
            logger.warning(message, metadata: metadata)
        }
    }

    /// The store refused work decided under `epoch`: another replica took the lease over. Nothing more is sent here.
    func fenced(_ project: String, epoch: Int64) {
        if claims.drop(project, epoch: epoch) { claims.lost(project, epoch: epoch) }
        _ = engine.standDown(project: project)
    }
}
