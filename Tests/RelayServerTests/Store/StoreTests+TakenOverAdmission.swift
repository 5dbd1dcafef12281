import Foundation
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import DeliveryEngine
@testable import RelayServer
@testable import RelayStore

/// Issue #50: a project's first event after a take-over, admitted on the new holder before any sweep of the project,
/// reads what a sweep would (the pending rows, then what FCM accepted under the previous holder). Where a newer version
/// waits too, the new holder does not deliver the older one itself: the sweep plans them together, newest first, so
/// the older stands down behind the newer instead of being sent first.
extension StoreTests {
    /// What ``ProjectLeases`` asks of the relay: one project, no plan (these tests read the answer, not a delivery).
    struct OneProjectHost: StoreHost {
        var projects: [String] { ["demo"] }
        var retention: (dedupWindow: Duration, historySize: Int) { (.seconds(600), 100) }
        func plan(for record: EventRecord, since: Int64?, logger: Logger) async -> DeliveryPlan? { nil }
        func marksReset(_ project: String, logger: Logger) {}
    }

    /// The previous holder (a) admitted version 60 (`newerPending`) or nothing; b has just taken the project's lease and
    /// not swept it. Version 59 reaches b: with 60 pending, b answers that another turn delivers it (the sender gets
    /// `202`) and asks for the sweep, the project still to be caught up; with nothing newer, b delivers 59 itself and
    /// the project is caught up.
    @Test(arguments: [true, false])
    func aTakenOverProjectsFirstEventLeavesAnOlderVersionToTheSweep(newerPending: Bool) async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                if newerPending { _ = try await admitted(60...60, by: a) }
                let clock = ManualDeliveryClock()
                let metrics = RelayMetrics()
                let claims = LeaseClaims(confirmation: b, lease: .seconds(60), clock: clock, metrics: metrics, logger: Self.logger)
                let now = clock.instant()
                claims.state.withLockedValue { state in
                    state.held["demo"] = LeaseClaims.Claim(until: now + .seconds(30), epoch: 2, confirmed: now)
                    state.toSeed = ["demo"]
                }
                let engine = DeliveryEngine(
                    settings: EngineSettings(), spool: nil, metrics: metrics.factory, clock: clock, logger: Self.logger,
                    replan: { _ in nil })
                let leases = ProjectLeases(store: b, claims: claims, host: OneProjectHost(), engine: engine)

                let answer = try await leases.admit(record(version: 59, id: "evt-59"), window: .seconds(600), logger: Self.logger)
                let (toSweep, toSeed) = claims.state.withLockedValue { ($0.toSweep, $0.toSeed) }
                if newerPending {
                    #expect(answer == .elsewhere)
                    #expect(toSweep == ["demo"])
                    #expect(toSeed == ["demo"], "caught up only once the sweep has read everything")
                } else {
                    guard case .deliverHere(committed: true, row: .some) = answer else {
                        Issue.record("answered \(answer), not delivered here")
                        return
                    }
                    #expect(toSweep.isEmpty)
                    #expect(toSeed.isEmpty)
                }
            }
        }
    }
}
