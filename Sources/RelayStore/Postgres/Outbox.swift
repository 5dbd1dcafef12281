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
    package func admit(_ record: EventRecord, window: Duration, notify: Bool = true) async throws(StoreError) -> Admission {
        // The lease holder delivers what it admits itself: only other replicas' admissions need to wake it.
        let request = Self.admission(record, window: window, notice: notify ? Self.notice(project: record.project, holder: holder) : "")
        let holders = try await admissions.admit(request) { batch throws(StoreError) in try await self.admitAll(batch) }
        return try Self.admission(of: record, holders: holders)
    }

    /// Admits the event only while this replica holds the lease `name` under `epoch` (fencing: a poll decided under an
    /// older epoch is refused with ``StoreError/leaseLost(_:)``, and nothing is admitted).
    package func admit(_ record: EventRecord, window: Duration, lease name: String, epoch: Int64) async throws(StoreError) -> Admission {
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
    static func admission(of record: EventRecord, holders: [String: AdmissionBatcher.Holder]) throws(StoreError) -> Admission {
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
    static func admission(_ record: EventRecord, window: Duration, notice: String) -> AdmissionBatcher.Request {
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
    package func update(_ record: EventRecord) async throws(StoreError) {
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
    package func settle(_ record: EventRecord, reports: [DeliveryReport]) async throws(StoreError) {
        try await settle([(record, reports)])
    }

    /// The project's events still to deliver, oldest first, in pages (so rows already under way, or that this relay
    /// cannot read, never hide newer ones).
    package func pending(project: String, pageSize: Int = 200) async throws(StoreError) -> [EventRecord] {
        var records: [EventRecord] = []
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
                guard let record = try? JSONDecoder().decode(EventRecord.self, from: Data(text.utf8)), record.defect == nil else {
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
}
