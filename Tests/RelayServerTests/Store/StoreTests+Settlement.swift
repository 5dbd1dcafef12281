import DeliveryEngine
import Testing

@testable import RelayStore

extension StoreTests {
    /// Step 12: the common settlement is a function whose plan the connection keeps (`force_generic_plan`), and that
    /// plan stays right as the outbox grows: made on an empty outbox, it still finds each event's row by its key, not
    /// by a sequential scan, once the outbox holds 200,000 rows (a prepared settlement did scan the whole table at
    /// every batch, 2026-12-05). One transaction, so the scans counted are this session's own
    /// (`pg_stat_xact_user_tables`), kept in settings rather than tables: a temporary table would change the search
    /// path, and with it make PostgreSQL plan again. Without the function's `enable_*` settings, the second settlement
    /// scans the table (its cached plan is a hash join over a sequential scan).
    @Test func theSettlementsKeptPlanFindsRowsByKeyWhateverTheOutboxsSize() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                try await stores[0].migrate()
            }
            let settle = { (first: Int) in
                """
                SELECT count(*)::text FROM rc_relay_settle(ARRAY(SELECT generate_series(\(first), \(first + 9)))::bigint[],
                    array_fill('[]'::text, ARRAY[10]), array_fill(true, ARRAY[10]), array_fill(''::text, ARRAY[10]))
                """
            }
            let scans = "SELECT seq_scan FROM pg_stat_xact_user_tables WHERE relname = 'rc_relay_outbox'"
            // psql prints each statement's answer: the last line is the last one's.
            let answer = try await cluster.sql(
                """
                INSERT INTO rc_relay_marks (project, relayed) VALUES ('demo', 0);
                ANALYZE rc_relay_outbox;
                \(settle(1));
                INSERT INTO rc_relay_outbox (project, version, key_version, keys, record, window_seconds)
                SELECT 'demo', g, gen_random_uuid(), '[]', '{}', 600 FROM generate_series(1, 200000) g;
                SELECT set_config('rc_relay_test.scans', (\(scans))::text, true);
                SELECT set_config('rc_relay_test.settled', (\(settle(199_990))), true);
                SELECT current_setting('rc_relay_test.settled') || ' settled, '
                    || (\(scans)) - current_setting('rc_relay_test.scans')::bigint || ' scans'
                """)
            #expect(answer.split(separator: "\n").last == "10 settled, 0 scans")
            #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_outbox WHERE settled") == "10")
            #expect(try await cluster.sql("SELECT relayed FROM rc_relay_marks WHERE project = 'demo'") == "199999")
        }
    }

    /// A common batch calls the function; one that needs more (a record without its row, a project's first row of
    /// marks on this replica, copies written apart) is the statement built for it.
    @Test func aCommonBatchCallsTheSettlementsFunctionAndOthersTheirStatement() {
        func sql(ids: [Int64] = [7, 8], unmarked: Set<String> = [], written: [String] = ["", ""]) -> String {
            PostgresStore.settlement(
                ids: ids, keys: ["demo/version/1", "demo/version/2"], reports: ["[]", "[]"], marks: [true, true], pings: ["", ""],
                written: written, unmarked: unmarked
            ).sql
        }
        #expect(sql().hasPrefix("SELECT rc_relay_settle("))
        for other in [sql(ids: [7, 0]), sql(unmarked: ["demo"]), sql(written: ["", "p-1-e8"])] {
            #expect(!other.contains("rc_relay_settle") && other.contains("UPDATE rc_relay_outbox"))
        }
    }

    /// A project's mark is written at most once per 100 ms (the store's clock) by a replica's settlements: the first
    /// settlement writes it in its statement; those within 100 ms of that write are held, and the newest of them is
    /// written once the 100 ms have passed, or at a flush. A reset forgets what is held; an outlier is never held.
    /// (Every settlement wrote it before: under load, a row version and a WAL record a webhook.)
    @Test func aProjectsMarkIsWrittenAtMostOnceEvery100Milliseconds() async throws {
        let clock = ManualDeliveryClock()
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1, clock: clock) { stores in
                let store = stores[0]
                try await store.migrate()
                var events: [EventRecord] = []
                for version in Int64(1)...9 {
                    var event = record(version: version, id: "evt-\(version)")
                    guard case .admitted(let row) = try await store.admit(event, window: .seconds(600)) else {
                        Issue.record("version \(version) was not admitted")
                        return
                    }
                    event.storeRow = row
                    events.append(event)
                }
                let mark = "SELECT coalesce(relayed::text, 'none') FROM rc_relay_marks WHERE project = 'demo'"
                let settled = "SELECT count(*) FROM rc_relay_outbox WHERE settled"
                store.outbox.settle(events[0], reports: [])
                try await eventually("the first settlement writes the mark") { (try? await cluster.sql(mark)) == "1" }
                // Four more, each in a round of its own, the clock still: settled, the mark held.
                for index in 1...4 {
                    store.outbox.settle(events[index], reports: [])
                    try await eventually("version \(index + 1) is settled") { (try? await cluster.sql(settled)) == "\(index + 1)" }
                }
                #expect(try await cluster.sql(mark) == "1")
                clock.advance(by: .milliseconds(100))
                try await eventually("the held mark is written 100 ms after the last write") { (try? await cluster.sql(mark)) == "5" }
                // Within 100 ms of that write: held until a flush, which writes it.
                store.outbox.settle(events[5], reports: [])
                try await eventually("version 6 is settled") { (try? await cluster.sql(settled)) == "6" }
                #expect(try await cluster.sql(mark) == "5")
                await store.flush()
                #expect(try await cluster.sql(mark) == "6")
                // Held, then reset: the reset's forgetting stands.
                store.outbox.settle(events[6], reports: [])
                try await eventually("version 7 is settled") { (try? await cluster.sql(settled)) == "7" }
                try await store.resetRelayed(project: "demo")
                await store.flush()
                clock.advance(by: .milliseconds(100))
                await store.flush()
                #expect(try await cluster.sql(mark) == "none")
                // Long after: the next settlement writes it at once.
                clock.advance(by: .seconds(1))
                store.outbox.settle(events[7], reports: [])
                try await eventually("the next settlement writes the mark") { (try? await cluster.sql(mark)) == "8" }
                // An outlier settled in one statement with a held version of its project: the version is held, the
                // outlier moves nothing, then or at the flush.
                var outlier = record(version: 900_000, id: "evt-far")
                outlier.outlier = true
                guard case .admitted(let far) = try await store.admit(outlier, window: .seconds(600)) else {
                    Issue.record("the outlier was not admitted")
                    return
                }
                outlier.storeRow = far
                #expect(try await store.settle([.init(record: outlier, reports: []), .init(record: events[8], reports: [])], paced: true).isEmpty)
                #expect(try await cluster.sql(mark) == "8")
                await store.flush()
                #expect(try await cluster.sql(mark) == "9")
                clock.release()
            }
        }
    }

    /// The pace's own bookkeeping, on durations alone: a held mark is due 100 ms after the project's last write; one
    /// wake is scheduled at a time; a wake that comes early (a timer is never late by contract, but may fire before a
    /// round sees the time it was set for) schedules the next rather than leaving the mark held until a flush.
    @Test func aHeldMarkIsWokenForAgainAfterAnEarlyWake() {
        var pace = MarksPace()
        #expect(pace.writesNow("demo", at: .zero))
        pace.wrote("demo", at: .zero)
        #expect(!pace.writesNow("demo", at: .milliseconds(10)))
        pace.hold("demo", 5)
        pace.hold("demo", 4)
        #expect(pace.wake(after: .milliseconds(10)) == .milliseconds(90))
        #expect(pace.wake(after: .milliseconds(20)) == nil)
        pace.woke()
        #expect(pace.takeDue(at: .milliseconds(50), all: false).isEmpty)
        #expect(pace.wake(after: .milliseconds(50)) == .milliseconds(50))
        pace.woke()
        #expect(pace.takeDue(at: .milliseconds(100), all: false) == ["demo": 5])
        #expect(pace.wake(after: .milliseconds(100)) == nil)
        #expect(!pace.writesNow("demo", at: .milliseconds(150)))
        #expect(pace.writesNow("demo", at: .milliseconds(200)))
        pace.hold("demo", 6)
        pace.forget("demo")
        #expect(pace.takeDue(at: .seconds(1), all: true).isEmpty)
    }
}
