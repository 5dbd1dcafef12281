import DeliveryEngine
import Foundation
import Logging
import PostgresNIO

/// Events in the outbox: admitted once across every replica, delivered by the project's lease holder, settled with
/// their reports (which answer a duplicate for the deduplication window).
extension PostgresStore {
    /// What admitting an event came to.
    package enum Admission: Sendable, Equatable {
        /// Committed: it will be delivered, whatever happens to this replica.
        case admitted
        /// The same event was admitted before and is still being delivered.
        case pending
        /// The same event was delivered; its reports.
        case settled([DeliveryReport])
        /// One of its keys belongs to another event (another project or version).
        case conflict(key: String)
    }

    /// Commits the event with its keys, unless one of its keys is taken; `window` is the deduplication window (a
    /// settled event older than it is forgotten first). `notify`: tell the replica that delivers the project (false
    /// when this one does). The admissions waiting at the same time share one round trip and one commit
    /// (``AdmissionBatcher``); this returns once the commit holding the event is done.
    package func admit(_ record: SpoolRecord, window: Duration, notify: Bool = true) async throws(StoreError) -> Admission {
        // The lease holder delivers what it admits itself: only other replicas' admissions need to wake it.
        let request = Self.admission(record, window: window, notice: notify ? Self.notice(project: record.project, holder: holder) : "")
        let holders = try await admissions.admit(request) { batch throws(StoreError) in try await self.admitAll(batch) }
        return try Self.admission(of: record, holders: holders)
    }

    /// Admits the event only while this replica holds the lease `name` under `epoch` (fencing: a poll decided under an
    /// older epoch is refused with ``StoreError/leaseLost(_:)``, and nothing is admitted).
    package func admit(_ record: SpoolRecord, window: Duration, lease name: String, epoch: Int64) async throws(StoreError) -> Admission {
        let request = Self.admission(record, window: window, notice: "")
        let holder = holder
        let holders = try await run("admit") { client, logger in
            try await client.withTransaction(logger: logger) { connection -> [String: AdmissionBatcher.Holder] in
                let lease = try await connection.query(
                    """
                    SELECT 1 FROM rc_relay_leases WHERE name = \(name) AND holder = \(holder) AND epoch = \(epoch) AND expires_at > now()
                    FOR SHARE
                    """, logger: logger)
                var held = false
                for try await _ in lease.decode(Int.self) { held = true }
                guard held else { throw StoreError.leaseLost(name) }
                let rows = try await connection.query(
                    """
                    SELECT holder_key, holder_fingerprint, holder_settled, holder_reports FROM rc_relay_admit(\(request.project),
                        \(request.version), \(request.fingerprint), \(request.record), \(request.keys), \(request.window), NULL)
                    """, logger: logger)
                var holders: [String: AdmissionBatcher.Holder] = [:]
                for try await (key, fingerprint, settled, reports) in rows.decode((String, String, Bool, String).self) {
                    holders[key] = AdmissionBatcher.Holder(fingerprint: fingerprint, settled: settled, reports: reports)
                }
                return holders
            }
        }
        return try Self.admission(of: record, holders: holders)
    }

    /// What the holders of an event's keys (none: it was admitted) say of its admission.
    private static func admission(of record: SpoolRecord, holders: [String: AdmissionBatcher.Holder]) throws(StoreError) -> Admission {
        guard !holders.isEmpty else { return .admitted }
        // In the order of the event's keys (its project and version first), as the in-memory registry does.
        for key in record.keys {
            guard let other = holders[key] else { continue }
            guard other.fingerprint == record.fingerprint else { return .conflict(key: key) }
            guard other.settled else { return .pending }
            do {
                return .settled(try JSONDecoder().decode([DeliveryReport].self, from: Data(other.reports.utf8)))
            } catch {
                throw .failed("the reports of the event could not be read: \(error)")
            }
        }
        // The holder was forgotten between the two steps: the caller's retry admits it.
        throw .unavailable("the event changed while it was admitted; retry")
    }

    /// The event as `rc_relay_admit_all` takes it; `notice` empty for none.
    static func admission(_ record: SpoolRecord, window: Duration, notice: String) -> AdmissionBatcher.Request {
        AdmissionBatcher.Request(
            project: record.project, version: record.version.versionNumber, fingerprint: record.fingerprint, record: record.jsonText,
            keys: record.keys, window: seconds(window), notice: notice)
    }

    /// One round of admissions: one statement, one transaction. Per request, the holders of its keys that are not it.
    func admitAll(_ batch: [AdmissionBatcher.Request]) async throws(StoreError) -> [[String: AdmissionBatcher.Holder]] {
        let projects = batch.map(\.project)
        let versions = batch.map(\.version)
        let fingerprints = batch.map(\.fingerprint)
        let records = batch.map(\.record)
        let keys = batch.flatMap(\.keys)
        let keyCounts = batch.map { Int32($0.keys.count) }
        let windows = batch.map(\.window)
        let notices = batch.map(\.notice)
        return try await run("admit") { client, logger in
            let rows = try await client.query(
                """
                SELECT * FROM rc_relay_admit_all(\(projects), \(versions), \(fingerprints), \(records), \(keys), \(keyCounts), \(windows),
                    \(notices))
                """, logger: logger)
            var holders = [[String: AdmissionBatcher.Holder]](repeating: [:], count: batch.count)
            for try await (item, key, fingerprint, settled, reports) in rows.decode((Int, String, String, Bool, String).self) {
                guard holders.indices.contains(item - 1) else {
                    throw StoreError.failed("the admission answered for event \(item) of \(batch.count)")
                }
                holders[item - 1][key] = AdmissionBatcher.Holder(fingerprint: fingerprint, settled: settled, reports: reports)
            }
            return holders
        }
    }

    /// Records progress (shards accepted, the routes still due at a stop) of an event still pending.
    package func update(_ record: SpoolRecord) async throws(StoreError) {
        let json = record.jsonText
        let key = record.keys.first ?? ""
        try await run("update") { client, logger in
            try await client.query(
                """
                UPDATE rc_relay_events SET record = \(json)
                WHERE id = (SELECT event FROM rc_relay_event_keys WHERE key = \(key)) AND NOT settled
                """, logger: logger)
        }
    }

    /// Marks the event delivered (or given up by an operator), with its reports for duplicates. Its record goes: only
    /// a delivery reads it, and the settled row version is smaller without it (less WAL: docs/performance.md).
    package func settle(_ record: SpoolRecord, reports: [DeliveryReport]) async throws(StoreError) {
        try await settle([(record, reports)])
    }

    /// The project's events still to deliver, oldest first, in pages (so rows already under way, or that this relay
    /// cannot read, never hide newer ones).
    package func pending(project: String, pageSize: Int = 200) async throws(StoreError) -> [SpoolRecord] {
        var records: [SpoolRecord] = []
        var after: Int64 = 0
        while true {
            let cursor = after
            let page = try await run("pending") { client, logger in
                let rows = try await client.query(
                    """
                    SELECT id, record FROM rc_relay_events WHERE project = \(project) AND NOT settled AND id > \(cursor)
                    ORDER BY id LIMIT \(pageSize)
                    """, logger: logger)
                var page: [(Int64, String)] = []
                for try await row in rows.decode((Int64, String).self) { page.append(row) }
                return page
            }
            for (_, text) in page {
                // A row this relay cannot read (written by hand, or by a newer rc-relay) is skipped, never trapped on.
                guard let record = try? JSONDecoder().decode(SpoolRecord.self, from: Data(text.utf8)), record.defect == nil else {
                    logger.error("outbox row skipped: it is not an event this relay can read", metadata: ["project": "\(project)"])
                    continue
                }
                records.append(record)
            }
            guard page.count == pageSize, let last = page.last?.0 else { return records }
            after = last
        }
    }

    /// Forgets settled events older than `window`, then all but the newest `keep` settled ones, and all but the
    /// newest `keepPings` entries of the delivery history. Returns how many rows went.
    @discardableResult
    package func prune(window: Duration, keep: Int, keepPings: Int = 1000) async throws(StoreError) -> Int {
        let seconds = Self.seconds(window)
        return try await run("prune") { client, logger in
            var removed = 0
            for query: PostgresQuery in [
                "DELETE FROM rc_relay_events WHERE settled AND settled_at < now() - make_interval(secs => \(seconds)) RETURNING 1",
                """
                DELETE FROM rc_relay_events WHERE settled AND id <= (
                    SELECT id FROM rc_relay_events WHERE settled ORDER BY id DESC OFFSET \(keep) LIMIT 1) RETURNING 1
                """,
                """
                DELETE FROM rc_relay_pings WHERE seq <= (
                    SELECT seq FROM rc_relay_pings ORDER BY seq DESC OFFSET \(keepPings) LIMIT 1) RETURNING 1
                """,
            ] {
                for try await _ in try await client.query(query, logger: logger).decode(Int.self) { removed += 1 }
            }
            return removed
        }
    }

    /// The channel a replica is told on when another admits an event.
    package static let channel = "rc_relay_events"

    /// The notice's payload: the project, and the replica that admitted the event (which delivers it itself when it
    /// holds the lease, so it ignores its own notices).
    static func notice(project: String, holder: String) -> String { project + "\n" + holder }

    /// Calls `onEvent` with the project of each event another replica admits, until cancelled or the connection
    /// drops (the caller listens again; its regular sweep covers the gap).
    package func listen(_ onEvent: @escaping @Sendable (String) -> Void) async throws(StoreError) {
        let holder = holder
        try await listen(on: Self.channel) { payload in
            let parts = payload.split(separator: "\n", maxSplits: 1).map(String.init)
            guard parts.count == 2, parts[1] != holder else { return }
            onEvent(parts[0])
        }
    }

    /// The channel an operator's discard of a ping is passed on, to the replica that delivers its project.
    package static let discards = "rc_relay_discards"

    /// Tells every replica to discard the route's dead ping of the event under `key` (the one delivering it does).
    package func requestDiscard(key: String, route: String) async throws(StoreError) {
        let payload = route + "\n" + key
        try await run("discard") { client, logger in
            try await client.query("SELECT pg_notify(\(Self.discards), \(payload))", logger: logger)
        }
    }

    /// Calls `onDiscard` with the event's key and the route of each discard an operator asked another replica for,
    /// until cancelled or the connection drops.
    package func listenForDiscards(_ onDiscard: @escaping @Sendable (_ key: String, _ route: String) -> Void) async throws(StoreError) {
        try await listen(on: Self.discards) { payload in
            // The route first: a route name has no line break, an event's key may.
            let parts = payload.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { return }
            onDiscard(parts[1], parts[0])
        }
    }

    /// The channel an operator's reset of a project's marks is passed on (every replica forgets them).
    package static let resets = "rc_relay_resets"

    /// Tells every replica to forget the project's marks.
    package func requestReset(project: String) async throws(StoreError) {
        try await run("reset") { client, logger in
            try await client.query("SELECT pg_notify(\(Self.resets), \(project))", logger: logger)
        }
    }

    /// Calls `onReset` with each project whose marks an operator reset, until cancelled or the connection drops.
    package func listenForResets(_ onReset: @escaping @Sendable (_ project: String) -> Void) async throws(StoreError) {
        try await listen(on: Self.resets, onReset)
    }

    private func listen(on channel: String, _ body: @escaping @Sendable (String) -> Void) async throws(StoreError) {
        do {
            try await client.withConnection { connection in
                try await connection.listen(on: channel) { notifications in
                    for try await notification in notifications { body(notification.payload) }
                }
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Returns once the engine's changes queued so far are applied.
    package func flush() async {
        while await !flush(within: .seconds(60)) {}
    }

    /// At a stop: returns once the engine's changes queued so far are applied, or after `limit` (the database is away:
    /// the changes not applied are given up, which sends again at worst). True when all were applied.
    package func flushBeforeStop(within limit: Duration) async -> Bool {
        outbox.stopping()
        return await flush(within: limit)
    }

    /// Returns once the engine's changes queued so far are applied, or after `limit`. True when all were applied. A
    /// wait that gives up takes its waiter out of the queue.
    package func flush(within limit: Duration) async -> Bool {
        let done = Settlement<Bool>()
        guard outbox.enqueue(.flush(done)) else { return true }
        if let applied = await done.value(within: limit, on: SystemDeliveryClock()) { return applied }
        outbox.forget(done)
        return false
    }

    /// Applies the engine's changes in order, consecutive settlements in one statement; a change the database does not
    /// take is retried until it is applied or the relay is stopping (then it is logged: the row keeps its older state).
    func applyChanges() async {
        for await _ in outbox.wakes { await apply(outbox.take()) }
        await apply(outbox.take())  // queued before the end
    }

    private func apply(_ changes: [OutboxSpool.Change]) async {
        var settlements: [(SpoolRecord, [DeliveryReport])] = []
        var entries = JournalBatch()
        for change in changes {
            switch change {
            case .settle(let record, let reports):
                settlements.append((record, reports))
                continue
            case .journal(let entry):
                entries.add(entry)
                continue
            case .flush, .update: break
            }
            await settleAll(settlements)
            settlements = []
            await journalAll(entries)
            entries = JournalBatch()
            switch change {
            case .flush(let waiter): waiter.settle(true)
            case .update(let record): await applying("update") { () throws(StoreError) in try await self.update(record) }
            case .settle, .journal: break
            }
        }
        await settleAll(settlements)
        await journalAll(entries)
    }

    /// Settles the events in one statement; if the database refuses it, one by one (so only the refused one is lost).
    private func settleAll(_ settlements: [(SpoolRecord, [DeliveryReport])]) async {
        guard !settlements.isEmpty else { return }
        if settlements.count > 1 {
            do {
                try await settle(settlements)
                return
            } catch {
                if case .unavailable = error {
                    await applying("settle") { () throws(StoreError) in try await self.settle(settlements) }
                    return
                }
            }
        }
        for (record, reports) in settlements {
            await applying("settle") { () throws(StoreError) in try await self.settle(record, reports: reports) }
        }
    }

    /// Settles several events in one statement.
    private func settle(_ settlements: [(SpoolRecord, [DeliveryReport])]) async throws(StoreError) {
        var keys: [String] = []
        var reports: [String] = []
        var marks: [Bool] = []
        for (record, settled) in settlements {
            keys.append(record.keys.first ?? "")
            reports.append(DeliveryReport.jsonText(settled))
            marks.append(record.outlier != true)
        }
        let (batchKeys, batchReports, batchMarks) = (keys, reports, marks)
        // The project's newest version relayed advances with the settlement, whoever delivered it (an outlier moves
        // nothing).
        try await run("settle") { client, logger in
            try await client.query(
                """
                WITH settled AS (
                    UPDATE rc_relay_events e SET settled = true, settled_at = now(), reports = v.reports, record = ''
                    FROM unnest(\(batchKeys)::text[], \(batchReports)::text[], \(batchMarks)::boolean[]) AS v(key, reports, marks),
                        rc_relay_event_keys k
                    WHERE k.key = v.key AND e.id = k.event AND NOT e.settled
                    RETURNING e.project, e.version, v.marks)
                INSERT INTO rc_relay_marks (project, relayed) SELECT project, max(version) FROM settled WHERE marks GROUP BY project
                ON CONFLICT (project) DO UPDATE SET relayed = EXCLUDED.relayed, updated_at = now()
                WHERE rc_relay_marks.relayed < EXCLUDED.relayed
                """, logger: logger)
        }
    }

    /// Writes the history copies in one statement; if the database refuses it, they are logged and dropped (the
    /// history is for reading: it never holds up the outbox).
    private func journalAll(_ batch: JournalBatch) async {
        guard !batch.entries.isEmpty else { return }
        await applying("journal") { () throws(StoreError) in try await self.journal(batch.entries) }
    }

    /// Runs one change until the database takes it, refuses it for good, or the relay stops while it is away.
    private func applying(_ what: String, _ change: () async throws(StoreError) -> Void) async {
        var delay = Duration.milliseconds(100)
        var attempts = 0
        while true {
            attempts += 1
            do {
                try await change()
                return
            } catch {
                if case .failed = error {
                    // The database refused it (not a lost connection): trying again cannot help, and every later
                    // change would wait behind it. The row keeps its older state, which sends again at worst.
                    logger.error(
                        "outbox change refused by PostgreSQL: the event will be delivered again",
                        metadata: ["change": "\(what)", "error": "\(error)"])
                    return
                }
                logger.warning("outbox change not applied yet; retrying", metadata: ["change": "\(what)", "error": "\(error)"])
                // Stopping: a few tries (about 3 s), then it is given up and the stop goes on.
                if outbox.isStopping, attempts >= 6 {
                    logger.error("outbox change not applied before the stop: the event will be delivered again", metadata: ["error": "\(error)"])
                    return
                }
                try? await Task.sleep(for: delay)
                // At most a quarter of the lease apart: once the database is back, this replica's progress (a hand-over
                // at a stand-down above all) is written before another replica's renewal can take its lease and read
                // the outbox.
                delay = min(delay * 2, .seconds(5), settings.lease / 4)
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
