import Foundation
import Logging
import RelayCore
import ServiceLifecycle
import Testing

@testable import DeliveryEngine
@testable import RelayStore

/// Leases with epochs (fencing), renewals of many projects in one statement, the newest version relayed per project,
/// and flush waiters during an outage: against a real PostgreSQL server, as the rest of the store's tests.
@Suite(.serialized) struct FencingTests {
    let store = StoreTests()

    @Test func oneStatementRenewsEveryLeaseAndEachTakeOverRaisesTheEpoch() async throws {
        try await withPostgres { cluster in
            try await store.withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                let names = (0..<200).map { "project/p\($0)" }
                let taken = try await a.renew(names, for: .seconds(60))
                #expect(taken.count == 200 && Set(taken.values) == [1])
                // One statement for all 200, whatever their number.
                #expect(try await b.renew(names, for: .seconds(60)).isEmpty)
                #expect(try await a.renew(names + names, for: .seconds(60)) == taken)  // renewed, same epochs
                // A graceful stop releases: the next holder's epoch is newer, and the old one is refused.
                try await a.release("project/p7")
                #expect(try await b.renew(["project/p7"], for: .seconds(60)) == ["project/p7": 2])
                #expect(try await a.confirm("project/p7", epoch: 1) == nil)
                #expect(try await b.confirm("project/p7", epoch: 2) != nil)
                // Taken back: epoch 3, so work a held under epoch 1 stays refused although a holds the lease again.
                try await b.release("project/p7")
                #expect(try await a.renew(["project/p7"], for: .seconds(60)) == ["project/p7": 3])
                #expect(try await a.confirm("project/p7", epoch: 1) == nil)
                // With the time the lease has left on the database's clock: at most the 60 s it was renewed for.
                let left = try await a.confirm("project/p7", epoch: 3)
                #expect(left.map { $0 > .seconds(50) && $0 <= .seconds(60) } == true, "\(String(describing: left))")
                // An older replica's statement (no epoch of its own) still raises it on a take-over: the trigger does.
                _ = try await cluster.sql("UPDATE rc_relay_leases SET holder = 'older-replica' WHERE name = 'project/p8'")
                #expect(try await cluster.sql("SELECT epoch FROM rc_relay_leases WHERE name = 'project/p8'") == "2")
                #expect(try await a.confirm("project/p8", epoch: 1) == nil)
            }
        }
    }

    /// Issue #52: an idle renewal is one row, the replica's heartbeat, whatever the number of leases it holds; a
    /// replica whose heartbeat expired is deleted by the replica that takes its leases, so its next heartbeat finds
    /// nothing and it cannot count on a lease that moved.
    @Test func aHeartbeatHoldsEveryLeaseAndOneFoundExpiredLosesThem() async throws {
        try await withPostgres { cluster in
            try await store.withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                let names = (0..<300).map { "project/p\($0)" }
                #expect(try await a.renew(names, for: .seconds(60)).count == 300)
                #expect(try await b.renew(names, for: .seconds(60)).isEmpty)
                let idle = try await a.beat(for: .seconds(60))
                #expect(idle.alive && !idle.somethingToTake)
                // A heartbeat rewrites no lease: the leases' row versions stay as they were.
                let versions = "SELECT string_agg(xmin::text, ',' ORDER BY name) FROM rc_relay_leases"
                let before = try await cluster.sql(versions)
                for _ in 0..<3 { #expect(try await a.beat(for: .seconds(60)).alive) }
                #expect(try await cluster.sql(versions) == before)
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_held WHERE holder = 'replica-0'") == "300")
                // a's heartbeat expires (a frozen replica): its leases stop counting, and every replica is told there
                // is something to take.
                _ = try await cluster.sql("UPDATE rc_relay_replicas SET expires_at = now() - interval '1 second' WHERE holder = 'replica-0'")
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_held") == "0")
                #expect(try await a.confirm("project/p1", epoch: 1) == nil)
                #expect(try await b.beat(for: .seconds(60)).somethingToTake)
                // b takes what it serves (half of them); a's heartbeat is gone with it.
                let taken = try await b.renew(Array(names.prefix(150)), for: .seconds(60))
                #expect(taken.count == 150 && Set(taken.values) == [2])
                let woken = try await a.beat(for: .seconds(60))
                #expect(!woken.alive)
                // a registers again and holds what nobody took (the same epochs: nobody held them meanwhile), not the rest.
                let kept = try await a.renew(names, for: .seconds(60))
                #expect(kept.count == 150 && Set(kept.keys) == Set(names.suffix(150)) && Set(kept.values) == [1])
                #expect(try await a.beat(for: .seconds(60)) == .init(alive: true, frees: 1, somethingToTake: false))
                // A graceful stop frees its leases, moves the frees count, and ends the heartbeat.
                try await b.release(Array(names.prefix(150)))
                #expect(try await a.beat(for: .seconds(60)).frees == 2)
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_replicas") == "1")
                #expect(try await a.renew(names, for: .seconds(60)).count == 300)
                // A project taken out of the configuration is freed by the next take that says so.
                #expect(try await a.renew(Array(names.dropFirst()), for: .seconds(60), freeingOthers: true).count == 299)
                #expect(try await b.renew(["project/p0"], for: .seconds(60)) == ["project/p0": 4])
            }
        }
    }

    @Test func aPollAdmissionDecidedUnderAnOlderEpochAdmitsNothing() async throws {
        try await withPostgres { cluster in
            try await store.withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                #expect(try await a.renew(["project/demo"], for: .seconds(60)) == ["project/demo": 1])
                let first = store.record(version: 3, id: nil)
                #expect(try await a.admit(first, window: .seconds(600), lease: "project/demo", epoch: 1).isAdmitted)
                // b takes the lease over while a is paused mid-poll.
                _ = try await cluster.sql("UPDATE rc_relay_leases SET expires_at = now() - interval '1 second'")
                #expect(try await b.renew(["project/demo"], for: .seconds(60)) == ["project/demo": 2])
                await #expect {
                    try await a.admit(store.record(version: 2, id: nil), window: .seconds(600), lease: "project/demo", epoch: 1)
                } throws: { error in
                    guard case StoreError.leaseLost("project/demo") = error else { return false }
                    return true
                }
                #expect(try await cluster.sql("SELECT string_agg(version::text, ',' ORDER BY version) FROM rc_relay_outbox") == "3")
            }
        }
    }

    @Test func theNewestVersionRelayedAdvancesWithEverySettlementWhoeverSettles() async throws {
        try await withPostgres { cluster in
            try await store.withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                #expect(try await b.relayed(project: "demo") == nil)
                for version: Int64 in [7, 9, 11] { _ = try await a.admit(store.record(version: version, id: nil), window: .seconds(600)) }
                a.outbox.settle(store.record(version: 9, id: nil), reports: [])
                await a.flush()
                #expect(try await b.relayed(project: "demo") == 9)
                // An older settlement on another replica moves nothing back.
                b.outbox.settle(store.record(version: 7, id: nil), reports: [])
                await b.flush()
                #expect(try await a.relayed(project: "demo") == 9)
                // An outlier (a version Remote Config does not know) is settled but moves no mark.
                var outlier = store.record(version: 11, id: nil)
                outlier.outlier = true
                a.outbox.settle(outlier, reports: [])
                await a.flush()
                #expect(try await cluster.sql("SELECT settled FROM rc_relay_outbox WHERE version = 11") == "t")
                #expect(try await b.relayed(project: "demo") == 9)
                try await b.noteRelayed(project: "demo", version: 5)
                #expect(try await a.relayed(project: "demo") == 9)
                try await b.noteRelayed(project: "demo", version: 10)
                #expect(try await a.relayed(project: "demo") == 10)
                try await a.resetRelayed(project: "demo")
                #expect(try await b.relayed(project: "demo") == nil)
            }
        }
    }

    /// Reads during an outage (each console page and `GET /admin/deliveries` writes this replica's history first,
    /// within a second) leave no waiter behind once they give up.
    @Test func flushWaitersThatGiveUpDuringAnOutageLeaveTheQueue() async throws {
        try await withPostgres { cluster in
            try await store.withReplicas(cluster, count: 1, statementTimeout: .seconds(1)) { stores in
                let store = stores[0]
                try await store.migrate()
                _ = try await store.admit(self.store.record(version: 1, id: nil), window: .seconds(600))
                try await cluster.stopServer()
                store.outbox.settle(self.store.record(version: 1, id: nil), reports: [])
                for _ in 0..<1000 { #expect(await store.flush(within: .milliseconds(1)) == false) }
                #expect(store.outbox.waiters == 0)
                try await cluster.startServer()
                await store.flush()
                #expect(try await cluster.sql("SELECT settled FROM rc_relay_outbox") == "t")
            }
        }
    }
}
