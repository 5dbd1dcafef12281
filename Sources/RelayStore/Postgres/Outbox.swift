import DeliveryEngine
import Foundation
import Logging
import PostgresNIO

/// Events in the outbox: admitted once across every replica, delivered by the project's lease holder, settled with
/// their reports (which answer a duplicate for the deduplication window).
extension PostgresStore {
    /// What admitting an event came to.
    package enum OutboxAdmission: Sendable, Equatable {
        /// Committed, as the row `id`: it will be delivered, whatever happens to this replica.
        case admitted(id: Int64)
        /// The same event was admitted before (row `id`) and is still being delivered.
        case pending(id: Int64)
        /// The same event was delivered; its reports.
        case settled([DeliveryReport])
        /// One of its keys belongs to another event (another project or version).
        case conflict(key: String)
    }

    /// Commits the event as one row, unless one of its keys is taken; `window` is the deduplication window (a settled
    /// event older than it is forgotten first). `notify`: tell the replica that delivers the project (false when this
    /// one does), after the commit. The admissions waiting at the same time share one statement and one commit
    /// (``AdmissionBatcher``); this returns once the commit holding the event is done.
    package func admit(_ record: EventRecord, window: Duration, notify: Bool = true) async throws(StoreError) -> OutboxAdmission {
        // The lease holder delivers what it admits itself: only other replicas' admissions need to wake it.
        let request = Self.admission(record, window: window, notice: notify ? Self.notice(project: record.project, holder: holder) : "")
        let outcome = try await admissions.admit(
            request, round: { batch throws(StoreError) in try await self.admitAll(batch) },
            notify: { notices in await self.notify(notices) })
        return try Self.admission(of: record, outcome: outcome)
    }

    /// Admits the event only while this replica holds the lease `name` under `epoch` (fencing: a poll decided under an
    /// older epoch is refused with ``StoreError/leaseLost(_:)``, and nothing is admitted).
    package func admit(_ record: EventRecord, window: Duration, lease name: String, epoch: Int64) async throws(StoreError) -> OutboxAdmission {
        let request = Self.admission(record, window: window, notice: "")
        let holder = holder
        let outcomes = try await admitting([request]) { batch throws(StoreError) in
            try await self.run("admit") { client, logger in
                try await client.withTransaction(logger: logger) { connection -> [Answer] in
                    let lease = try await connection.query(
                        """
                        SELECT 1 FROM rc_relay_leases l JOIN rc_relay_replicas r ON r.holder = l.holder
                        WHERE l.name = \(name) AND l.holder = \(holder) AND l.epoch = \(epoch) AND l.expires_at = 'infinity'
                            AND r.expires_at > now()
                        FOR SHARE
                        """, logger: logger)
                    var held = false
                    for try await _ in lease.decode(Int.self) { held = true }
                    guard held else { throw StoreError.leaseLost(name) }
                    return try await Self.answers(to: batch) { query in try await connection.query(query, logger: logger) }
                }
            }
        }
        return try Self.admission(of: record, outcome: outcomes[0])
    }

    /// Records progress (shards accepted, the routes still due at a stop) of an event still pending, in its row.
    package func update(_ record: EventRecord) async throws(StoreError) {
        let (json, id, key) = (record.jsonTextForRow, record.storeRow ?? 0, record.keys.first ?? "")
        try await run("update") { client, logger in
            try await client.query(
                """
                UPDATE rc_relay_outbox SET record = \(json)
                WHERE id = coalesce(nullif(\(id)::bigint, 0), (SELECT id FROM rc_relay_outbox WHERE key_version = rc_relay_key(\(key))))
                    AND NOT settled
                """, logger: logger)
        }
    }

    /// Marks the event delivered (or given up by an operator), with its reports for duplicates. Its record goes: only
    /// a delivery reads it, and the settled row version is smaller without it (less WAL: docs/performance.md).
    package func settle(_ record: EventRecord, reports: [DeliveryReport]) async throws(StoreError) {
        try await settle([Settling(record: record, reports: reports)])
    }

    /// The project's events still to deliver, oldest first, in pages (so rows already under way, or that this relay
    /// cannot read, never hide newer ones).
    ///
    /// No index tells pending rows from settled ones (a settlement stays a HOT update), so a sweep would read every row
    /// of the project's window. It starts past ``sweptThrough``: the newest id of the project below which every row is
    /// settled and older than ``settledLag`` (by then no admission that took a lower id can still be uncommitted), moved
    /// forward after each sweep.
    package func pending(project: String, pageSize: Int = 200) async throws(StoreError) -> [EventRecord] {
        var records: [EventRecord] = []
        let start = sweptThrough.withLockedValue { $0[project] ?? 0 }
        let lag = Self.seconds(settledLag)
        var after = start
        var through: Int64?
        while true {
            // The first page's statement also finds how far the project is settled for good: the newest row below its
            // first pending one received more than the lag ago (later pages start past pending rows: never from them).
            let (cursor, first) = (after, after == start)
            let page = try await run("pending") { client, logger in
                let rows = try await client.query(
                    """
                    WITH page AS (
                        SELECT id, CASE WHEN record IS NULL THEN ''
                            -- Its keys and project are kept once, in their columns (a row of schema 9 or older has both
                            -- in its record as well, one of schema 10 its project).
                            WHEN left(record, 8) = '{"keys":' THEN record
                            WHEN left(record, 11) = '{"project":' THEN '{"keys":' || keys || ',' || substr(record, 2)
                            ELSE '{"keys":' || keys || ',"project":' || to_json(project)::text || ',' || substr(record, 2) END AS record
                        FROM rc_relay_outbox
                        WHERE project = \(project) AND NOT settled AND id > \(cursor) ORDER BY id LIMIT \(pageSize)),
                    through AS (
                        SELECT max(id) AS id FROM rc_relay_outbox
                        WHERE \(first) AND project = \(project) AND id > \(cursor)
                            AND id < coalesce((SELECT min(id) FROM page), 9223372036854775807)
                            AND received_at < now() - make_interval(secs => \(lag)))
                    SELECT page.id, page.record, through.id FROM through LEFT JOIN page ON true ORDER BY page.id
                    """, logger: logger)
                var page: [(Int64, String)] = []
                var through: Int64?
                for try await (id, record, settled) in rows.decode((Int64?, String?, Int64?).self) {
                    through = settled ?? through
                    if let id, let record { page.append((id, record)) }
                }
                return (page, through)
            }
            if first { through = page.1 }
            for (id, text) in page.0 {
                // A row this relay cannot read (written by hand, or by a newer rc-relay) is skipped, never trapped on.
                guard var record = try? JSONDecoder().decode(EventRecord.self, from: Data(text.utf8)), record.defect == nil else {
                    logger.error("outbox row skipped: it is not an event this relay can read", metadata: ["project": "\(project)"])
                    continue
                }
                record.storeRow = id
                records.append(record)
            }
            guard page.0.count == pageSize, let last = page.0.last?.0 else { break }
            after = last
        }
        if let through { sweptThrough.withLockedValue { $0[project] = max($0[project] ?? 0, through) } }
        return records
    }

    /// How old a row must be before a sweep may pass it for good: an admission still uncommitted that took a lower id
    /// began at most a statement timeout before it committed, so twice that, and a margin, is past any.
    var settledLag: Duration { settings.statementTimeout * 2 + .seconds(5) }
}
