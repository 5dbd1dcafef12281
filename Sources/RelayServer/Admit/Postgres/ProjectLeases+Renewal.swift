import DeliveryEngine
import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayStore
import ServiceLifecycle

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

    /// Renews every lease this replica holds and takes every free one, in one statement whatever the number of
    /// projects (one round trip per `lease / 4`, also with the database far away).
    func renew() async {
        let projects = configuration.current.projects.ids
        let sent = claims.now
        let held: [String: Int64]
        do {
            held = try await store.renew(projects.map(Self.leaseName), for: lease)
            contact()
        } catch {
            failed(error, doing: "renewing the projects' leases")
            standDownWhereLapsed()
            return
        }
        var taken: [String] = []
        var retaken: [String] = []
        var lost: [String] = []
        state.withLockedValue { state in
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
        // A project just taken is swept whole; of the others, only those with anything pending, found in one
        // statement (the safety net for a notice lost on the way: idle, a round costs the same for 1 project or 10,000).
        for project in taken { requestSweep(project) }
        let justTaken = Set(taken)  // 10,000 projects taken at the start: no scan of the list per project
        let holding = projects.filter { held[Self.leaseName($0)] != nil && !justTaken.contains($0) }
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

    /// Stops the deliveries of each project whose claim lapsed (another replica holds it, or it could not be renewed
    /// in time): the other replica delivers them from the outbox.
    func standDownWhereLapsed() {
        guard !planted.contains(.lapseCheck) else { return }
        let now = claims.now
        let lapsed = state.withLockedValue { state in
            let lapsed = state.held.filter { $0.value.until <= now }.map(\.key)
            for project in lapsed { state.held[project] = nil }
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
