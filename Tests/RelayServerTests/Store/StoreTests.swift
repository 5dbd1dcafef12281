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

    /// Runs `body` with `count` stores (replicas) on one database, their pools running.
    func withReplicas(
        _ cluster: PostgresCluster, count: Int = 2, statementTimeout: Duration = .seconds(10),
        _ body: @escaping @Sendable ([PostgresStore]) async throws -> Void
    ) async throws {
        let stores = try (0..<count).map { index in
            try PostgresStore(settings: cluster.settings(statementTimeout: statementTimeout), logger: Self.logger, holder: "replica-\(index)")
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
                #expect(applied.filter { !$0.isEmpty } == [[1, 2, 3, 4, 5, 6]])
                #expect(applied.filter(\.isEmpty).count == 3)
            }
            #expect(try await cluster.sql("SELECT string_agg(version::text, ',' ORDER BY version) FROM rc_relay_schema") == "1,2,3,4,5,6")
            // Step 4: the admission functions plan once per connection, not once per event.
            #expect(
                try await cluster.sql(
                    "SELECT string_agg(proname || ' ' || array_to_string(proconfig, ','), '; ' ORDER BY proname) FROM pg_proc WHERE proname LIKE 'rc_relay_admit%'"
                )
                    == "rc_relay_admit plan_cache_mode=force_generic_plan; rc_relay_admit_all plan_cache_mode=force_generic_plan")
        }
    }

    /// A database the previous rc-relay made, with events in it, takes the newest step with its events and keys as they
    /// were: a redelivery is still a duplicate, and pruning still takes an event's keys.
    @Test func aDatabaseWithEventsMigratesFromTheStepBefore() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                _ = try await cluster.sql("CREATE TABLE rc_relay_schema (version integer PRIMARY KEY, description text NOT NULL)")
                for step in Migrations.steps where step.version < Migrations.latest {
                    // One transaction per step, as the relay applies them.
                    _ = try await cluster.sql(step.statements.joined(separator: ";\n"))
                    _ = try await cluster.sql("INSERT INTO rc_relay_schema (version, description) VALUES (\(step.version), 'before')")
                }
                // Admitted and settled on the schema before.
                #expect(try await store.admit(record(), window: .seconds(600)) == .admitted)
                // Settled as the rc-relay before settled it (today's settlement also notes the newest version relayed,
                // in a table the step before may not have).
                _ = try await cluster.sql(
                    "UPDATE rc_relay_events SET settled = true, settled_at = now(), reports = '[]', record = '' WHERE version = 7")
                #expect(try await store.admit(record(version: 8, id: nil), window: .seconds(600)) == .admitted)
                #expect(try await store.migrate() == [Migrations.latest])
                #expect(try await store.admit(record(), window: .seconds(600)) == .settled([]))
                #expect(try await store.admit(record(version: 8, id: nil), window: .seconds(600)) == .pending)
                #expect(try await store.prune(window: .zero, keep: 1000) == 1)
                #expect(try await cluster.sql("SELECT string_agg(key, ',' ORDER BY key) FROM rc_relay_event_keys") == "demo/version/8")
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
                    guard case StoreError.schemaTooNew(found: 999, known: 6) = error else { return false }
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
                #expect(try await a.admit(record(), window: .seconds(600)) == .admitted)
                // The same event reaching the other replica (a redelivery behind the load balancer).
                #expect(try await b.admit(record(), window: .seconds(600)) == .pending)
                // The same version by another way in (no id, or another id) is the same event.
                #expect(try await b.admit(record(id: "evt-other"), window: .seconds(600)) == .pending)
                // Its id for another version is a conflict, named by the key that clashed.
                #expect(try await b.admit(record(version: 8), window: .seconds(600)) == .conflict(key: "demo/id/evt-1"))
                let report = DeliveryReport(id: "d1", route: "default", status: .accepted, messageName: "projects/demo/messages/1", attempts: [])
                try await a.settle(record(), reports: [report])
                #expect(try await b.admit(record(), window: .seconds(600)) == .settled([report]))
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_events") == "1")
            }
        }
    }

    @Test func concurrentAdmissionsCommitOneEvent() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 3) { stores in
                try await stores[0].migrate()
                let outcomes = try await withThrowingTaskGroup(of: PostgresStore.Admission.self) { group in
                    for index in 0..<12 {
                        group.addTask { try await stores[index % 3].admit(record(), window: .seconds(600)) }
                    }
                    return try await group.reduce(into: [PostgresStore.Admission]()) { $0.append($1) }
                }
                #expect(outcomes.filter { $0 == .admitted }.count == 1)
                #expect(outcomes.filter { $0 == .pending }.count == 11)
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_events") == "1")
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_event_keys") == "2")
            }
        }
    }

    @Test func oneRoundAdmitsEachEventOnItsOwnKeys() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                func request(_ record: EventRecord) -> AdmissionBatcher.Request {
                    PostgresStore.admission(record, window: .seconds(600), notice: "")
                }
                // In one round: an event, the same event again, its id for another version, an event without an id
                // (no keys but its version's), and another project's.
                let round = [
                    record(), record(), record(version: 8), record(version: 9, id: nil), record(project: "other", version: 7),
                ].map(request)
                let holders = try await store.admitAll(round)
                let first = AdmissionBatcher.Holder(fingerprint: "demo/7", settled: false, reports: "[]")
                #expect(holders.count == 5)
                #expect(holders[0].isEmpty)
                #expect(holders[1] == ["demo/version/7": first, "demo/id/evt-1": first])
                #expect(holders[2] == ["demo/id/evt-1": first])
                #expect(holders[3].isEmpty)
                #expect(holders[4].isEmpty)
                #expect(try await cluster.sql("SELECT string_agg(fingerprint, ',' ORDER BY id) FROM rc_relay_events") == "demo/7,demo/9,other/7")
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_event_keys") == "5")
                // An empty round is an empty answer.
                #expect(try await store.admitAll([]).isEmpty)
            }
        }
    }

    /// Another replica commits a key of the round while the round waits on that key's index: the event that lost it
    /// is taken back and told its holder, an event after it in the round that claims the same key is told the same, and
    /// the rest of the round stands.
    @Test(.timeLimit(.minutes(1))) func anEventThatLosesAKeyToAConcurrentCommitIsTakenBack() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 2) { stores in
                let (store, other) = (stores[0], stores[1])
                try await store.migrate()
                let round = [record(), record(project: "other"), record()].map {
                    PostgresStore.admission($0, window: .seconds(600), notice: "")
                }
                let holders = try await withKeyHeldOpen(by: other, cluster: cluster) { try await store.admitAll(round) }
                let concurrent = AdmissionBatcher.Holder(fingerprint: "demo/7", settled: false, reports: "[]")
                #expect(holders == [["demo/id/evt-1": concurrent], [:], ["demo/id/evt-1": concurrent]])
                #expect(try await cluster.sql(Self.eventsByRecord) == "concurrent,other/7")
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_event_keys") == "3")
            }
        }
    }

    /// The stored events in order: the other replica's by its record, the relay's by their fingerprints.
    static let eventsByRecord =
        "SELECT string_agg(CASE WHEN record = 'concurrent' THEN record ELSE fingerprint END, ',' ORDER BY id) FROM rc_relay_events"

    /// Runs `admission` while `other` holds key `demo/id/evt-1` in an open transaction (an event of fingerprint
    /// `demo/7`, record `concurrent`), and commits that transaction once the admission waits for the key's lock.
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
                        WITH e AS (
                            INSERT INTO rc_relay_events (project, version, fingerprint, record) VALUES ('demo', 7, 'demo/7', 'concurrent')
                            RETURNING id)
                        INSERT INTO rc_relay_event_keys (key, event) SELECT 'demo/id/evt-1', id FROM e
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

    @Test func aSettledEventIsForgottenAfterTheWindow() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(), window: .seconds(600)) == .admitted)
                try await store.settle(record(), reports: [])
                // A settled event keeps its keys, fingerprint and reports, which answer a duplicate; its record is
                // only for delivering it, so settling drops it (a smaller row version, less WAL).
                #expect(try await cluster.sql("SELECT settled, record, reports FROM rc_relay_events") == "t||[]")
                #expect(try await store.admit(record(), window: .seconds(600)) == .settled([]))
                // Past the window (zero here) it is a new event again, as in one process.
                #expect(try await store.admit(record(), window: .zero) == .admitted)
                try await store.settle(record(), reports: [])
                #expect(try await store.prune(window: .zero, keep: 1000) == 1)
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_event_keys") == "0")
            }
        }
    }

    /// A new event whose key is held by a settled event past the window takes the key over; one whose other key is
    /// held by an event still pending is refused, and takes back all it inserted. However an event row goes (pruning,
    /// an operator, an older replica), its keys go with it.
    @Test func anExpiredHolderIsForgottenOnlyWhenItsKeyIsWanted() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                // Version 7 with id evt-1, settled; version 8 with id evt-2, pending.
                #expect(try await store.admit(record(), window: .seconds(600)) == .admitted)
                try await store.settle(record(), reports: [])
                #expect(try await store.admit(record(version: 8, id: "evt-2"), window: .seconds(600)) == .admitted)
                // Within the window, evt-1 for version 9 clashes with the settled event.
                #expect(try await store.admit(record(version: 9), window: .seconds(600)) == .conflict(key: "demo/id/evt-1"))
                // An event that wants none of its keys leaves it, even past the window.
                #expect(try await store.admit(record(version: 20, id: "evt-20"), window: .zero) == .admitted)
                #expect(try await cluster.sql("SELECT string_agg(fingerprint, ',' ORDER BY id) FROM rc_relay_events WHERE settled") == "demo/7")
                // Past the window (zero here), the settled event is forgotten and its id taken over; the pending one
                // is not forgotten, whatever the window.
                #expect(try await store.admit(record(version: 9), window: .zero) == .admitted)
                #expect(try await store.admit(record(version: 10, id: "evt-2"), window: .zero) == .conflict(key: "demo/id/evt-2"))
                #expect(try await cluster.sql("SELECT string_agg(fingerprint, ',' ORDER BY id) FROM rc_relay_events") == "demo/8,demo/20,demo/9")
                #expect(
                    try await cluster.sql(
                        "SELECT string_agg(k.key || '=' || e.fingerprint, ',' ORDER BY k.key) FROM rc_relay_event_keys k JOIN rc_relay_events e ON e.id = k.event"
                    )
                        == "demo/id/evt-1=demo/9,demo/id/evt-2=demo/8,demo/id/evt-20=demo/20,demo/version/20=demo/20,demo/version/8=demo/8,demo/version/9=demo/9"
                )
                // A row deleted by hand takes its keys; no key is left without its event.
                _ = try await cluster.sql("DELETE FROM rc_relay_events WHERE fingerprint = 'demo/8'")
                #expect(
                    try await cluster.sql("SELECT string_agg(key, ',' ORDER BY key) FROM rc_relay_event_keys")
                        == "demo/id/evt-1,demo/id/evt-20,demo/version/20,demo/version/9")
                #expect(try await store.admit(record(version: 10, id: "evt-2"), window: .seconds(600)) == .admitted)
            }
        }
    }

    @Test func pruningKeepsTheNewestSettledEventsAndEveryPendingOne() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                for version in Int64(1)...5 {
                    _ = try await store.admit(record(version: version, id: nil), window: .seconds(600))
                    if version != 2 { try await store.settle(record(version: version, id: nil), reports: []) }
                }
                #expect(try await store.prune(window: .seconds(600), keep: 2) == 2)
                #expect(try await cluster.sql("SELECT string_agg(version::text, ',' ORDER BY version) FROM rc_relay_events") == "2,4,5")
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
                    "INSERT INTO rc_relay_events (project, version, fingerprint, record) VALUES ('demo', 9, 'demo/9', '{\"keys\": []}')")
                #expect(try await store.pending(project: "demo").map(\.version.versionNumber) == [3])
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
                try await a.prune(window: .seconds(600), keep: 1000, keepPings: 2)
                #expect(try await log.list(.init()).map(\.id) == ["a-3", "a-2"])
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
                // A holder that stops renewing (a crash) loses it once it expires, by the database's clock: the lease is
                // made to have expired a second ago (no waiting on the wall clock), and the other replica takes it.
                _ = try await cluster.sql("UPDATE rc_relay_leases SET expires_at = now() - interval '1 second' WHERE name = 'project/demo'")
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
                #expect(try await store.admit(record(version: 1, id: nil), window: .seconds(600)) == .admitted)
                // Every server process stopped: connections stay open, and nothing answers.
                try cluster.signalServer(SIGSTOP)
                await #expect {
                    try await store.admit(record(version: 2, id: nil), window: .seconds(600))
                } throws: { error in
                    guard case StoreError.unavailable = error else { return false }
                    return true
                }
                try cluster.signalServer(SIGCONT)
                var admitted: PostgresStore.Admission?
                while admitted == nil { admitted = try? await store.admit(record(version: 3, id: nil), window: .seconds(600)) }
                #expect(admitted == .admitted)
            }
        }
    }

    @Test func aChangeTheDatabaseRefusesDoesNotHoldUpTheOthers() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                for version in Int64(1)...2 { _ = try await store.admit(record(version: version, id: nil), window: .seconds(600)) }
                // A row the database refuses to change (a trigger stands for any refusal that retrying cannot cure).
                _ = try await cluster.sql(
                    """
                    CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN IF NEW.version = 1 THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$;
                    CREATE TRIGGER refuse BEFORE UPDATE ON rc_relay_events FOR EACH ROW EXECUTE FUNCTION refuse();
                    """)
                store.outbox.settle(record(version: 1, id: nil), reports: [])
                store.outbox.settle(record(version: 2, id: nil), reports: [])
                await store.flush()
                #expect(
                    try await cluster.sql("SELECT string_agg(version::text || ':' || settled::text, ',' ORDER BY version) FROM rc_relay_events")
                        == "1:false,2:true")
            }
        }
    }

    @Test func anOutageIsUnavailableAndTheStoreRecoversByItself() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                #expect(try await store.admit(record(version: 1, id: nil), window: .seconds(600)) == .admitted)
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
                var admitted: PostgresStore.Admission?
                while admitted == nil { admitted = try? await store.admit(record(version: 2, id: nil), window: .seconds(600)) }
                #expect(admitted == .admitted)
                await store.flush()
                #expect(
                    try await cluster.sql("SELECT string_agg(version::text || ':' || settled::text, ',' ORDER BY version) FROM rc_relay_events")
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
                #expect(try await store.admit(record(version: 1, id: nil), window: .seconds(600)) == .admitted)
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
