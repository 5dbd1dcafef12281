import Foundation
import Logging
import RelayCore
import ServiceLifecycle
import Testing

@testable import DeliveryEngine
@testable import RelayStore

/// The shared store against a real PostgreSQL server (a throwaway cluster per test): migrations, admission across
/// replicas, leases, the outbox and an outage.
@Suite(.serialized) struct StoreTests {
    /// At `info`; `RC_RELAY_TEST_STORE_LOG=trace` (or `debug`) shows PostgresNIO's pool and connections, to study a
    /// hang.
    static let logger = {
        var logger = Logger(label: "store-test")
        if let level = ProcessInfo.processInfo.environment["RC_RELAY_TEST_STORE_LOG"].flatMap(Logger.Level.init(rawValue:)) {
            logger.logLevel = level
        }
        return logger
    }()

    func record(project: String = "demo", version: Int64 = 7, id: String? = "evt-1") -> EventRecord {
        EventRecord(
            keys: ["\(project)/version/\(version)"] + (id.map { ["\(project)/id/\($0)"] } ?? []), project: project, eventID: id, format: "cloudevent",
            version: TemplateVersion(versionNumber: version), receivedAt: Date(timeIntervalSince1970: 1_700_000_000))
    }

    /// Admits one event per version (ids `evt-<version>`) through `store`, each carrying its row, as the engine's do.
    func admitted(_ versions: ClosedRange<Int64>, by store: PostgresStore) async throws -> [EventRecord] {
        var events: [EventRecord] = []
        for version in versions {
            var event = record(version: version, id: "evt-\(version)")
            guard case .admitted(let row) = try await store.admit(event, window: .seconds(600)) else {
                throw StoreError.failed("version \(version) was not admitted")
            }
            event.storeRow = row
            events.append(event)
        }
        return events
    }

    /// Runs `body` with `count` stores (replicas) on one database, their pools running.
    func withReplicas(
        _ cluster: PostgresCluster, count: Int = 2, statementTimeout: Duration = .seconds(10),
        clock: any DeliveryClock = SystemDeliveryClock(), _ body: @escaping @Sendable ([PostgresStore]) async throws -> Void
    ) async throws {
        let stores = try (0..<count).map { index in
            try PostgresStore(
                settings: cluster.settings(statementTimeout: statementTimeout), logger: Self.logger, holder: "replica-\(index)", clock: clock)
        }
        // Each pool before its store, as the relay places them: a store writes its last changes before its pool stops.
        let group = ServiceGroup(services: stores.flatMap { [$0.pool, $0] as [any Service] }, logger: Self.logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            defer { tasks.cancelAll() }
            try await body(stores)
            await group.triggerGracefulShutdown()
            try await tasks.next()
        }
    }

    @Test func replicasStartingTogetherMigrateOnce() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 4) { stores in
                let applied = try await withThrowingTaskGroup(of: [Int].self) { group in
                    for store in stores { group.addTask { try await store.migrate() } }
                    return try await group.reduce(into: [[Int]]()) { $0.append($1) }
                }
                #expect(applied.filter { !$0.isEmpty } == [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]])
                #expect(applied.filter(\.isEmpty).count == 3)
            }
            #expect(
                try await cluster.sql("SELECT string_agg(version::text, ',' ORDER BY version) FROM rc_relay_schema") == "1,2,3,4,5,6,7,8,9,10,11,12")
            // Step 11: three fifths of each outbox page left free at insert, so every settlement stays on its page.
            #expect(try await cluster.sql("SELECT reloptions::text FROM pg_class WHERE relname = 'rc_relay_outbox'") == "{fillfactor=40}")
            // Step 7: no PL/pgSQL runs per event any more (the lease epoch's trigger runs per take-over, step 12's
            // settlement per batch), and no trigger on the outbox.
            #expect(
                try await cluster.sql(
                    "SELECT string_agg(proname || ':' || l.lanname, ',' ORDER BY proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE proname LIKE 'rc_relay%'"
                )
                    == "rc_relay_key:sql,rc_relay_lease_epoch:plpgsql,rc_relay_settle:plpgsql")
            #expect(try await cluster.sql("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'rc_relay_outbox'::regclass") == "0")
        }
    }

    /// The relay hashes an event's keys itself (PostgreSQL does not inline `rc_relay_key`): its hash is the function's,
    /// for any text, so rows admitted before and after the change deduplicate each other. And a pending row keeps its
    /// record without the keys and the project, which a sweep puts back from their columns.
    @Test func theRelaysKeyHashIsTheDatabasesAndARowsKeysAreKeptOnce() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                for key in ["demo/version/1", "webhook/msg_1", "démo/id/évt 🚀", "x", String(repeating: "k", count: 5000)] {
                    let sql = try await cluster.sql("SELECT rc_relay_key('\(key)')::text")
                    #expect(PostgresStore.hashed(key).lowercased() == sql)
                }
                var event = record(version: 3, id: "evt-3")
                event.keys.append("webhook/msg-3")
                guard case .admitted(let id) = try await store.admit(event, window: .seconds(600)) else {
                    Issue.record("version 3 was not admitted")
                    return
                }
                event.storeRow = id
                #expect(
                    try await cluster.sql("SELECT position('\"keys\"' in record), position('\"project\"' in record), keys FROM rc_relay_outbox")
                        == "0|0|\(keysJSON(event))")
                #expect(try await store.pending(project: "demo") == [event])
                // A row written by schema 10 (its project in its record) reads the same.
                _ = try await cluster.sql(#"UPDATE rc_relay_outbox SET record = '{"project":"demo",' || substr(record, 2)"#)
                store.sweptThrough.withLockedValue { $0 = [:] }
                #expect(try await store.pending(project: "demo") == [event])
                // And one written by schema 9 (its keys in its record too).
                _ = try await cluster.sql("UPDATE rc_relay_outbox SET record = $$\(event.jsonText)$$")
                store.sweptThrough.withLockedValue { $0 = [:] }
                #expect(try await store.pending(project: "demo") == [event])
                // A duplicate by any of its keys is held by the row, whoever hashed its keys.
                guard case .pending(let held) = try await store.admit(event, window: .seconds(600)) else {
                    Issue.record("the duplicate was admitted")
                    return
                }
                #expect(held == id)
                // The relay's sessions compile nothing: JIT cost the pruning statement 15 to 200 ms a call.
                let jit = try await store.run("jit") { client, logger in
                    var setting = ""
                    for try await value in try await client.query("SHOW jit", logger: logger).decode(String.self) { setting = value }
                    return setting
                }
                #expect(jit == "off")
            }
        }
    }

    private func keysJSON(_ event: EventRecord) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        return String(decoding: (try? encoder.encode(event.keys)) ?? Data(), as: UTF8.self)
    }

    /// Issue #50: an event is one row, its settlement and its progress are HOT updates (no new index entry), and no
    /// index reads a column either changes.
    @Test func anEventIsOneRowAndItsSettlementIsAHotUpdate() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                var events: [EventRecord] = []
                for version in Int64(1)...20 {
                    var event = record(version: version, id: "evt-\(version)")
                    event.keys.append("webhook/msg-\(version)")
                    guard case .admitted(let id) = try await store.admit(event, window: .seconds(600)) else {
                        Issue.record("version \(version) was not admitted")
                        return
                    }
                    event.storeRow = id
                    events.append(event)
                }
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_outbox") == "20")
                for var event in events {
                    event.done = ["waved@0"]
                    try store.outbox.write(event)
                    await store.flush()
                    store.outbox.settle(event, reports: [])
                    await store.flush()
                }
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_outbox WHERE settled AND record IS NULL") == "20")
                // Forty updates, every one of them HOT: each of the table's five indexes (small enough for one page,
                // its root) holds one entry per row, where an update that is not HOT would have added one more per row
                // and per update (pageinspect counts dead entries too; no vacuum ran).
                _ = try await cluster.sql("CREATE EXTENSION IF NOT EXISTS pageinspect")
                #expect(
                    try await cluster.sql(
                        """
                        SELECT string_agg((SELECT count(*) FROM bt_page_items(c.relname::text, 1))::text, ',' ORDER BY c.relname)
                        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'rc_relay_outbox'::regclass
                        """) == "20,20,20,20,20")
                // The keys' text stays where an operator reads it.
                #expect(
                    try await cluster.sql("SELECT keys FROM rc_relay_outbox WHERE version = 3")
                        == #"["demo/version/3","demo/id/evt-3","webhook/msg-3"]"#)
            }
        }
    }

    /// A database of schema 6 holding events, pending and settled, takes step 7 with them: a redelivery of a settled
    /// one is still a duplicate (by any of its keys), the pending ones are listed for delivery with their progress and
    /// settle by their new rows, and their keys still clash with another version's.
    @Test func aDatabaseWithEventsMigratesFromTheStepBefore() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await cluster.migrate(through: 6)
                // Admitted as schema 6's rc-relay admitted them: 7 settled, 8 pending with progress, 9 pending with a
                // webhook-id.
                var pending = record(version: 8, id: "evt-8")
                pending.done = ["waved@0"]
                var signed = record(version: 9, id: nil)
                signed.keys.append("webhook/msg-9")
                for event in [record(), pending, signed] {
                    let keys = event.keys.map { "'\($0)'" }.joined(separator: ",")
                    _ = try await cluster.sql(
                        """
                        SELECT count(*) FROM rc_relay_admit('demo', \(event.version.versionNumber), '\(event.fingerprint)', '\(event.jsonText)',
                            ARRAY[\(keys)], 600, NULL)
                        """)
                }
                _ = try await cluster.sql(
                    "UPDATE rc_relay_events SET settled = true, settled_at = now(), reports = '[]', record = '' WHERE version = 7")
                #expect(try await store.migrate() == [7, 8, 9, 10, 11, 12])
                #expect(try await cluster.sql("SELECT count(*) FROM pg_class WHERE relname IN ('rc_relay_events', 'rc_relay_event_keys')") == "0")
                #expect(try await store.admit(record(), window: .seconds(600)) == .settled([]))
                #expect(try await store.admit(record(version: 7, id: "evt-other"), window: .seconds(600)) == .settled([]))
                #expect(try await store.admit(record(version: 10, id: "evt-8"), window: .seconds(600)) == .conflict(key: "demo/id/evt-8"))
                var bySignature = record(version: 11, id: nil)
                bySignature.keys.append("webhook/msg-9")
                #expect(try await store.admit(bySignature, window: .seconds(600)) == .conflict(key: "webhook/msg-9"))
                let listed = try await store.pending(project: "demo")
                #expect(listed.map(\.version.versionNumber) == [8, 9])
                #expect(listed.first?.done == ["waved@0"])
                #expect(listed.allSatisfy { $0.storeRow != nil })
                for event in listed { store.outbox.settle(event, reports: []) }
                await store.flush()
                #expect(try await store.pending(project: "demo").isEmpty)
                #expect(try await store.relayed(project: "demo") == 9)
                #expect(try await store.admit(record(version: 8, id: nil), window: .seconds(600)) == .settled([]))
            }
        }
    }

    @Test func aSchemaNewerThanKnownIsRefused() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                try await stores[0].migrate()
                _ = try await cluster.sql("INSERT INTO rc_relay_schema (version, description) VALUES (999, 'from the future')")
                await #expect {
                    try await stores[0].migrate()
                } throws: { error in
                    guard case StoreError.schemaTooNew(found: 999, known: 12) = error else { return false }
                    return true
                }
            }
        }
    }

    @Test func anEventIsAdmittedOnceAcrossReplicas() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                #expect(try await a.admit(record(), window: .seconds(600)).isAdmitted)
                // The same event reaching the other replica (a redelivery behind the load balancer).
                #expect(try await b.admit(record(), window: .seconds(600)).isPending)
                // The same version by another way in (no id, or another id) is the same event.
                #expect(try await b.admit(record(id: "evt-other"), window: .seconds(600)).isPending)
                // Its id for another version is a conflict, named by the key that clashed.
                #expect(try await b.admit(record(version: 8), window: .seconds(600)) == .conflict(key: "demo/id/evt-1"))
                let report = DeliveryReport(id: "d1", route: "default", status: .accepted, messageName: "projects/demo/messages/1", attempts: [])
                try await a.settle(record(), reports: [report])
                #expect(try await b.admit(record(), window: .seconds(600)) == .settled([report]))
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_outbox") == "1")
            }
        }
    }

    @Test func concurrentAdmissionsCommitOneEvent() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 3) { stores in
                try await stores[0].migrate()
                let outcomes = try await withThrowingTaskGroup(of: PostgresStore.OutboxAdmission.self) { group in
                    for index in 0..<12 {
                        group.addTask { try await stores[index % 3].admit(record(), window: .seconds(600)) }
                    }
                    return try await group.reduce(into: [PostgresStore.OutboxAdmission]()) { $0.append($1) }
                }
                #expect(outcomes.filter(\.isAdmitted).count == 1)
                #expect(outcomes.filter(\.isPending).count == 11)
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_outbox WHERE key_id IS NOT NULL") == "1")
            }
        }
    }

    /// The rows of the outbox as `project/version`, in order (a round inserts its events in the order of their keys'
    /// hashes, so rows are not in the order of a round's events).
    static let events = "SELECT string_agg(project || '/' || version, ',' ORDER BY project, version) FROM rc_relay_outbox"

    @Test func oneRoundAdmitsEachEventOnItsOwnKeys() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                func request(_ record: EventRecord) -> AdmissionBatcher.Request {
                    PostgresStore.admission(record, window: .seconds(600), notice: "")
                }
                // In one round: an event, an event without an id (no keys but its version's), and another project's.
                let first = try await store.admitAll([record(), record(version: 9, id: nil), record(project: "other", version: 7)].map(request))
                #expect(first.count == 3)
                guard case .admitted(let id) = first[0] else {
                    Issue.record("the first event was not admitted: \(first)")
                    return
                }
                #expect(first.allSatisfy { if case .admitted = $0 { true } else { false } })
                // The next round: the same event again, and its id for another version. A holder is named once, by the
                // first of its keys the event claims, in the order of an event's keys (its version's first).
                let holder = AdmissionBatcher.Holder(id: id, fingerprint: "demo/7", settled: false, reports: "[]")
                #expect(
                    try await store.admitAll([record(), record(version: 8)].map(request))
                        == [.held(["demo/version/7": holder]), .held(["demo/id/evt-1": holder])])
                #expect(try await cluster.sql(Self.events) == "demo/7,demo/9,other/7")
                // An empty round is an empty answer.
                #expect(try await store.admitAll([]).isEmpty)
            }
        }
    }

    /// Another replica commits a key of the round while the round waits on that key's index: the event that lost it
    /// is told its holder (asked again, since the statement's snapshot predates the other commit), and the rest of the
    /// round stands.
    @Test(.timeLimit(.minutes(1))) func anEventThatLosesAKeyToAConcurrentCommitIsToldItsHolder() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 2) { stores in
                let (store, other) = (stores[0], stores[1])
                try await store.migrate()
                let round = [record(), record(project: "other")].map { PostgresStore.admission($0, window: .seconds(600), notice: "") }
                let outcomes = try await withKeyHeldOpen(by: other, cluster: cluster) { try await store.admitAll(round) }
                guard case .held(let holders) = outcomes.first, let holder = holders["demo/version/7"] else {
                    Issue.record("the event was not told its holder: \(outcomes)")
                    return
                }
                #expect(holder.fingerprint == "demo/7")
                #expect(outcomes.count == 2)
                #expect(try await cluster.sql(Self.eventsByRecord) == "concurrent,other/7")
            }
        }
    }

    /// The stored events in order: the other replica's by its record, the relay's by project and version.
    static let eventsByRecord =
        "SELECT string_agg(CASE WHEN record = 'concurrent' THEN record ELSE project || '/' || version END, ',' ORDER BY id) FROM rc_relay_outbox"

    /// Runs `admission` while `other` holds the keys of `demo/7` and `demo/id/evt-1` in an open transaction (record
    /// `concurrent`), and commits that transaction once the admission waits for the key's lock.
    private func withKeyHeldOpen<T: Sendable>(
        by other: PostgresStore, cluster: PostgresCluster, _ admission: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let (locked, lockedSignal) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseSignal) = AsyncStream.makeStream(of: Void.self)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await other.client.withTransaction(logger: Self.logger) { connection in
                    try await connection.query(
                        """
                        INSERT INTO rc_relay_outbox (project, version, key_version, key_id, keys, record, window_seconds)
                        VALUES ('demo', 7, rc_relay_key('demo/version/7'), rc_relay_key('demo/id/evt-1'), '[]', 'concurrent', 600)
                        """, logger: Self.logger)
                    lockedSignal.yield()
                    for await _ in release { break }
                }
                return nil
            }
            for await _ in locked { break }
            group.addTask { try await admission() }
            // The event waited for: the admission is blocked on the key's lock (each look is a psql process, which paces
            // the loop; the test's time limit ends it if the admission never blocks). Then the other replica commits.
            while try await cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") == "0" {}
            releaseSignal.yield()
            var outcome: T?
            for try await result in group { if let result { outcome = result } }
            return try #require(outcome)
        }
    }

    @Test func aSettledEventIsForgottenAfterItsWindow() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(), window: .seconds(600)).isAdmitted)
                try await store.settle(record(), reports: [])
                // A settled event keeps its keys and reports, which answer a duplicate; its record is only for
                // delivering it, so settling drops it (a smaller row version, less WAL).
                #expect(try await cluster.sql("SELECT settled, record IS NULL, reports FROM rc_relay_outbox") == "t|t|[]")
                #expect(try await store.admit(record(), window: .seconds(600)) == .settled([]))
                // Within its own window, whatever the window of the event that asks; nothing to prune.
                #expect(try await store.admit(record(), window: .zero) == .settled([]))
                #expect(try await store.prune(window: .zero) == 0)
                // An event admitted with a window of zero is forgotten at once: a new event again, as in one process.
                #expect(try await store.admit(record(version: 8, id: nil), window: .zero).isAdmitted)
                try await store.settle(record(version: 8, id: nil), reports: [])
                #expect(try await store.admit(record(version: 8, id: nil), window: .zero).isAdmitted)
                try await store.settle(record(version: 8, id: nil), reports: [])
                // Past its window, a row among the newest `historySize` events stays for its pings' history (and
                // deduplicates nothing, as above); beyond them, it goes.
                #expect(try await store.prune(window: .zero) == 0)
                #expect(try await store.prune(window: .zero, keepPings: 1) == 0)
                #expect(try await store.prune(window: .zero, keepPings: 0) == 1)
                #expect(try await cluster.sql(Self.events) == "demo/7")
            }
        }
    }

    /// A new event whose key is held by a settled event past its window takes the key over; one whose other key is
    /// held by an event still pending is refused, and nothing of it is kept.
    @Test func anExpiredHolderIsForgottenOnlyWhenItsKeyIsWanted() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                // Version 7 with id evt-1, settled (a window of zero: expired at once); version 8 with id evt-2, pending.
                #expect(try await store.admit(record(), window: .zero).isAdmitted)
                try await store.settle(record(), reports: [])
                #expect(try await store.admit(record(version: 8, id: "evt-2"), window: .zero).isAdmitted)
                // An event that wants none of its keys leaves it.
                #expect(try await store.admit(record(version: 20, id: "evt-20"), window: .seconds(600)).isAdmitted)
                #expect(try await cluster.sql("SELECT string_agg(project || '/' || version, ',') FROM rc_relay_outbox WHERE settled") == "demo/7")
                // The settled event is forgotten and its id taken over; the pending one is not forgotten, whatever the
                // window.
                #expect(try await store.admit(record(version: 9), window: .seconds(600)).isAdmitted)
                #expect(try await store.admit(record(version: 10, id: "evt-2"), window: .seconds(600)) == .conflict(key: "demo/id/evt-2"))
                #expect(try await cluster.sql(Self.events) == "demo/8,demo/9,demo/20")
                // A row deleted by hand takes its keys with it: it is one row.
                _ = try await cluster.sql("DELETE FROM rc_relay_outbox WHERE version = 8")
                #expect(try await store.admit(record(version: 10, id: "evt-2"), window: .seconds(600)).isAdmitted)
            }
        }
    }

    /// Issue #50: deduplication lasted for the newest 1,000 settled events across all projects (about 0.4 s at bench
    /// rates), so a busy project pushed a quiet one's events out. It lasts each event's window now, however many.
    @Test func aBusyProjectDoesNotShortenAQuietOnesDeduplication() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(project: "quiet"), window: .seconds(600)).isAdmitted)
                try await store.settle(record(project: "quiet"), reports: [])
                // 1,200 settled events of a busy project, admitted and settled in rounds as under load.
                _ = try await cluster.sql(
                    """
                    INSERT INTO rc_relay_outbox (project, version, key_version, keys, window_seconds, settled, settled_at, reports)
                    SELECT 'busy', v, rc_relay_key('busy/version/' || v), '[]', 600, true, now(), '[]' FROM generate_series(1, 1200) AS v
                    """)
                #expect(try await store.prune(window: .seconds(600), keepPings: 10) == 0)
                #expect(try await store.admit(record(project: "quiet"), window: .seconds(600)) == .settled([]))
            }
        }
    }

    /// Issue #50: the pending events of a project no replica holds were never pruned. Those older than a day go (its
    /// configuration is gone everywhere), with an error line; a project held keeps its pending events, however old,
    /// and so do recent ones.
    @Test func pendingEventsOfAProjectNobodyHoldsGoAfterADay() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                for project in ["held", "gone", "recent"] {
                    #expect(try await store.admit(record(project: project), window: .seconds(600)).isAdmitted)
                }
                #expect(try await store.acquire("project/held", for: .seconds(60)))
                _ = try await cluster.sql("UPDATE rc_relay_outbox SET received_at = now() - interval '25 hours' WHERE project <> 'recent'")
                #expect(try await store.prune(window: .seconds(600)) == 1)
                #expect(try await cluster.sql("SELECT string_agg(project, ',' ORDER BY id) FROM rc_relay_outbox") == "held,recent")
            }
        }
    }

    /// Pruning is one replica's at a time: while another holds the lock, a replica's round removes nothing.
    @Test func oneReplicaPrunesAtATime() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 2) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                #expect(try await a.admit(record(), window: .zero).isAdmitted)
                try await a.settle(record(), reports: [])
                try await b.client.withTransaction(logger: Self.logger) { connection in
                    try await connection.query("SELECT pg_advisory_xact_lock(\(PostgresStore.pruneLock))", logger: Self.logger)
                    #expect(try await a.prune(window: .zero, keepPings: 0) == 0)
                }
                #expect(try await a.prune(window: .zero, keepPings: 0) == 1)
            }
        }
    }

    @Test func theOutboxListsPendingEventsWithTheirProgress() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                _ = try await store.admit(record(version: 1, id: nil), window: .seconds(600))
                _ = try await store.admit(record(project: "other", version: 2, id: nil), window: .seconds(600))
                _ = try await store.admit(record(version: 3, id: nil), window: .seconds(600))
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [1, 3])
                // Progress through the engine's spool calls, applied in order by the running store.
                var progressed = record(version: 3, id: nil)
                progressed.done = ["waved@0", "waved@1"]
                try store.outbox.write(progressed)
                store.outbox.settle(record(version: 1, id: nil), reports: [])
                await store.flush()
                let pending = try await store.pending(project: "demo")
                #expect(pending.map(\.version.versionNumber) == [3])
                #expect(pending.first?.done == ["waved@0", "waved@1"])
                // A row the relay cannot read is skipped, never trapped on.
                _ = try await cluster.sql(
                    """
                    INSERT INTO rc_relay_outbox (project, version, key_version, keys, record, window_seconds)
                    VALUES ('demo', 9, rc_relay_key('demo/version/9'), '[]', '{"keys": []}', 600)
                    """)
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [3])
            }
        }
    }

    /// No index tells pending rows from settled ones (a settlement stays HOT), so a sweep starts past the rows it knows
    /// settled for good: those below the first pending row and older than the lag an uncommitted admission could have.
    @Test func aSweepStartsPastTheRowsSettledForGood() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                for version in Int64(1)...4 { _ = try await store.admit(record(version: version, id: nil), window: .seconds(600)) }
                for version in Int64(1)...2 { try await store.settle(record(version: version, id: nil), reports: []) }
                // Recent rows: nothing is passed for good yet.
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [3, 4])
                #expect(store.sweptThrough.withLockedValue { $0["demo"] } == nil)
                _ = try await cluster.sql("UPDATE rc_relay_outbox SET received_at = now() - interval '1 hour'")
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [3, 4])
                let second = try await cluster.sql("SELECT id FROM rc_relay_outbox WHERE version = 2")
                #expect(store.sweptThrough.withLockedValue { $0["demo"] }.map(String.init) == second)
                // What lies at or below it is not read again (a row made pending by hand there stays unseen).
                _ = try await cluster.sql(
                    "UPDATE rc_relay_outbox SET settled = false, record = (SELECT record FROM rc_relay_outbox WHERE version = 4) WHERE version = 1")
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [3, 4])
                // Once 3 settles, the next sweep passes it and stops before 4.
                try await store.settle(record(version: 3, id: nil), reports: [])
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [4])
                let third = try await cluster.sql("SELECT id FROM rc_relay_outbox WHERE version = 3")
                #expect(store.sweptThrough.withLockedValue { $0["demo"] }.map(String.init) == third)
            }
        }
    }

    /// Issue #50: a late settlement from a holder that lost the project settled whatever row held the event's first
    /// key, so it could settle a copy admitted again after a prune. A settlement addresses its row.
    @Test func aLateSettlementSettlesOnlyItsOwnRow() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                guard case .admitted(let first) = try await store.admit(record(), window: .zero) else {
                    Issue.record("not admitted")
                    return
                }
                var stale = record()
                stale.storeRow = first
                // Settled, forgotten past its window, and admitted again: a new row, pending.
                try await store.settle(stale, reports: [])
                #expect(try await store.prune(window: .zero, keepPings: 0) == 1)
                #expect(try await store.admit(record(), window: .seconds(600)).isAdmitted)
                // The first delivery's settlement arrives again, late.
                store.outbox.settle(stale, reports: [])
                await store.flush()
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [7])
            }
        }
    }

    func entry(_ id: String, project: String = "demo", route: String = "default", version: Int64 = 7, report: DeliveryReport? = nil)
        -> DeliveryHistory.Entry
    {
        DeliveryHistory.Entry(
            id: id, project: project, route: route, version: TemplateVersion(versionNumber: version), eventID: "evt-\(id)", origin: .webhook,
            retryOf: nil, toDevice: false, validateOnly: false, receivedAt: Date(timeIntervalSince1970: 1_700_000_000), settledAt: nil,
            report: report)
    }

    @Test func everyReplicasHistoryIsReadFromAnyReplicaNewestFirst() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                // Replica a's engine records a ping as it starts, waits and settles: one batch holds its three copies.
                var started = entry("a-1")
                started.audience = .condition("'PUSH_RC' in topics && 'beta' in topics")
                started.shard = PingSchedule.Shard(index: 1, count: 4, spacing: .seconds(30))
                a.outbox.record(started)
                var waiting = started
                waiting.waitingFor = "quiet period"
                a.outbox.record(waiting)
                let accepted = DeliveryReport(route: "default", status: .accepted, messageName: "projects/demo/messages/1", attempts: [])
                var settled = waiting
                (settled.report, settled.waitingFor) = (accepted, nil)
                a.outbox.record(settled)
                #expect(await a.flush(within: .seconds(10)))
                // Newest first: by when the store first had the ping.
                b.outbox.record(entry("b-1", project: "other", route: "beta", version: 8))
                #expect(await b.flush(within: .seconds(10)))
                a.outbox.record(entry("a-2", version: 9, report: DeliveryReport(route: "default", status: .dead, attempts: [])))
                #expect(await a.flush(within: .seconds(10)))
                // Each replica reads what the other wrote.
                let log = SharedDeliveryLog(store: b)
                #expect(try await log.list(.init()).map(\.id) == ["a-2", "b-1", "a-1"])
                #expect(try await log.entry("a-1") == settled)
                #expect(try await log.list(.init(status: "accepted")).map(\.id) == ["a-1"])
                #expect(try await log.list(.init(status: "dead", project: "demo", version: 9)).map(\.id) == ["a-2"])
                #expect(try await log.list(.init(route: "beta")).map(\.id) == ["b-1"])
                #expect(try await log.list(.init(limit: 1)).map(\.id) == ["a-2"])
                #expect(try await log.entry("nowhere") == nil)
                // A replica's own pings are written before it reads, so what it just recorded is listed.
                a.outbox.record(entry("a-3"))
                #expect(try await SharedDeliveryLog(store: a).entry("a-3")?.id == "a-3")
                // Pruning keeps the newest `historySize`.
                try await a.prune(window: .seconds(600), keepPings: 2)
                #expect(try await log.list(.init()).map(\.id) == ["a-3", "a-2"])
            }
        }
    }

    /// Issue #50: a reset of a project's marks is durable (a generation each replica compares at its renewals), and a
    /// take-over after it reads only what FCM accepted since: the far version that called for the reset no longer
    /// silences the next real one.
    @Test func aResetIsAGenerationAndATakeOverReadsOnlyWhatFollowedIt() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                let accepted = DeliveryReport(route: "default", status: .accepted, messageName: "projects/demo/messages/1", attempts: [])
                var far = entry("far", version: 9_000_000, report: accepted)
                far.audience = .topic("PUSH_RC")
                store.outbox.record(far)
                await store.flush()
                try await store.noteRelayed(project: "demo", version: 9_000_000)
                #expect(try await store.acceptedPings(project: "demo").map(\.id) == ["far"])
                #expect(try await store.resetGenerations() == [:])
                #expect(try await store.resetRelayed(project: "demo") == 1)
                #expect(try await store.resetRelayed(project: "demo") == 2)
                #expect(try await store.resetGenerations() == ["demo": 2])
                #expect(try await store.relayed(project: "demo") == nil)
                #expect(try await store.acceptedPings(project: "demo").isEmpty)
                // What follows the reset counts again, and moves the mark from nothing.
                var next = entry("next", version: 12, report: accepted)
                next.audience = .topic("PUSH_RC")
                store.outbox.record(next)
                await store.flush()
                try await store.noteRelayed(project: "demo", version: 12)
                #expect(try await store.acceptedPings(project: "demo").map(\.id) == ["next"])
                #expect(try await store.relayed(project: "demo") == 12)
            }
        }
    }

    @Test func aDiscardIsPassedToTheOtherReplicas() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                let (heard, tell) = AsyncStream.makeStream(of: [String].self)
                let listening = Task { try await b.listenForDiscards { key, route in tell.yield([key, route]) } }
                defer { listening.cancel() }
                // LISTEN has no acknowledgement the test can wait for: ask until b hears (a notice sent before b
                // listens is lost, as PostgreSQL documents).
                let asking = Task {
                    while !Task.isCancelled {
                        try await a.requestDiscard(key: "demo/id/line\nbreak", route: "waved@2")
                        try await Task.sleep(for: .milliseconds(50))
                    }
                }
                defer { asking.cancel() }
                var iterator = heard.makeAsyncIterator()
                #expect(await iterator.next() == ["demo/id/line\nbreak", "waved@2"])
            }
        }
    }

    @Test func theDoctorReadsTheSchemasVersionAndTheLeasesAndWritesNothing() async throws {
        try await withPostgres { cluster in
            let settings = cluster.settings(statementTimeout: .seconds(10))
            // A database the relay never used: no tables, and the diagnosis creates none.
            let fresh = try await PostgresStore.diagnose(settings, logger: Self.logger)
            #expect(fresh == StoreDiagnosis(schemaVersion: nil, latestKnown: Migrations.latest, leases: nil, leasesHeld: nil))
            #expect(try await PostgresStore.diagnose(settings, logger: Self.logger) == fresh)
            try await withReplicas(cluster) { stores in
                try await stores[0].migrate()
                #expect(try await stores[0].acquire("project/demo", for: .seconds(60)))
                #expect(try await stores[1].acquire("project/other", for: .seconds(60)))
                try await stores[1].release("project/other")
            }
            let used = try await PostgresStore.diagnose(settings, logger: Self.logger)
            #expect(used == StoreDiagnosis(schemaVersion: Migrations.latest, latestKnown: Migrations.latest, leases: 2, leasesHeld: 1))
        }
    }

    @Test func aLeaseHasOneHolderUntilReleasedOrExpired() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                #expect(try await a.acquire("project/demo", for: .seconds(60)))
                #expect(try await a.acquire("project/demo", for: .seconds(60)))  // renewed
                #expect(try await b.acquire("project/demo", for: .seconds(60)) == false)
                #expect(try await b.holders() == ["project/demo": "replica-0"])
                // A graceful stop releases: the other replica takes over at once.
                try await a.release("project/demo")
                #expect(try await b.acquire("project/demo", for: .seconds(60)))
                #expect(try await a.acquire("project/demo", for: .seconds(60)) == false)
                // A holder that stops renewing (a crash) loses it once its heartbeat expires, by the database's clock: the
                // heartbeat is made to have expired a second ago (no waiting on the wall clock), and the other replica
                // takes the lease.
                _ = try await cluster.sql("UPDATE rc_relay_replicas SET expires_at = now() - interval '1 second' WHERE holder = 'replica-1'")
                #expect(try await a.acquire("project/demo", for: .seconds(60)))
                #expect(try await b.acquire("project/demo", for: .seconds(60)) == false)
            }
        }
    }

    @Test func aHungDatabaseIsUnavailableAtTheStatementTimeout() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1, statementTimeout: .seconds(1)) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(version: 1, id: nil), window: .seconds(600)).isAdmitted)
                // Every server process stopped: connections stay open, and nothing answers.
                try cluster.signalServer(SIGSTOP)
                await #expect {
                    try await store.admit(record(version: 2, id: nil), window: .seconds(600))
                } throws: { error in
                    guard case StoreError.unavailable = error else { return false }
                    return true
                }
                try cluster.signalServer(SIGCONT)
                var admitted: PostgresStore.OutboxAdmission?
                while admitted == nil { admitted = try? await store.admit(record(version: 3, id: nil), window: .seconds(600)) }
                #expect(admitted?.isAdmitted == true)
            }
        }
    }

    @Test func aChangeTheDatabaseRefusesDoesNotHoldUpTheOthers() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                var rows: [Int64] = []
                for version in Int64(1)...2 {
                    if case .admitted(let row) = try await store.admit(record(version: version, id: nil), window: .seconds(600)) { rows.append(row) }
                }
                // A row the database refuses to change (a trigger stands for any refusal that retrying cannot cure).
                _ = try await cluster.sql(
                    """
                    CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN IF NEW.version = 1 THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
                    CREATE TRIGGER refuse BEFORE UPDATE ON rc_relay_outbox FOR EACH ROW EXECUTE FUNCTION refuse();
                    """)
                // Each with its ping's settled copy, which would ride the settlement.
                let accepted = DeliveryReport(route: "default", status: .accepted, attempts: [])
                for (version, row) in zip(Int64(1)...2, rows) {
                    var event = record(version: version, id: nil)
                    event.storeRow = row
                    store.outbox.record(entry("p-\(version)-e\(row)", version: version, report: accepted))
                    store.outbox.settle(event, reports: [])
                }
                await store.flush()
                #expect(
                    try await cluster.sql("SELECT string_agg(version::text || ':' || settled::text, ',' ORDER BY version) FROM rc_relay_outbox")
                        == "1:false,2:true")
                // The refused settlement's ping keeps its history, apart; the other's rode its settlement.
                #expect(try await cluster.sql("SELECT string_agg(version::text, ',') FROM rc_relay_pings") == "1")
                #expect(try await cluster.sql("SELECT string_agg(version::text, ',') FROM rc_relay_outbox WHERE pings IS NOT NULL") == "2")
            }
        }
    }

    @Test func anOutageIsUnavailableAndTheStoreRecoversByItself() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(version: 1, id: nil), window: .seconds(600)).isAdmitted)
                try await cluster.stopServer()
                await #expect {
                    try await store.admit(record(version: 2, id: nil), window: .seconds(600))
                } throws: { error in
                    guard case StoreError.unavailable = error else { return false }
                    return true
                }
                // Progress queued while the database is away is applied once it is back.
                store.outbox.settle(record(version: 1, id: nil), reports: [])
                try await cluster.startServer()
                var admitted: PostgresStore.OutboxAdmission?
                while admitted == nil { admitted = try? await store.admit(record(version: 2, id: nil), window: .seconds(600)) }
                #expect(admitted?.isAdmitted == true)
                await store.flush()
                #expect(
                    try await cluster.sql("SELECT string_agg(version::text || ':' || settled::text, ',' ORDER BY version) FROM rc_relay_outbox")
                        == "1:true,2:false")
            }
        }
    }

    /// A stop whose changes cannot all be written says so: the flush reports false, and the leases are then left to
    /// expire rather than released over an outbox that lacks them (docs/replicas.md).
    @Test func aStopWhileTheDatabaseIsAwayReportsItsChangesNotWritten() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1, statementTimeout: .seconds(1)) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(version: 1, id: nil), window: .seconds(600)).isAdmitted)
                #expect(await store.flushBeforeStop(within: .seconds(30)), "nothing queued: all written")
                try await cluster.stopServer()
                store.outbox.settle(record(version: 1, id: nil), reports: [])
                // Stopping, the change is tried six times (a second each at most), then given up: well within the bound.
                #expect(await store.flushBeforeStop(within: .seconds(60)) == false)
                try await cluster.startServer()
            }
        }
    }
}

extension PostgresStore.OutboxAdmission {
    var isAdmitted: Bool { if case .admitted = self { true } else { false } }
    var isPending: Bool { if case .pending = self { true } else { false } }
}
