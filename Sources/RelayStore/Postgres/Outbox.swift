import DeliveryEngine
import Foundation
import Logging
import PostgresNIO

/// Events in the outbox: admitted once across every replica, delivered by the project's lease holder, settled with
/// their reports (which answer a duplicate for the deduplication window).
extension PostgresStore {
    /// What admitting an event came to.
    package enum Admission: Sendable, Equatable {
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
    package func admit(_ record: EventRecord, window: Duration, notify: Bool = true) async throws(StoreError) -> Admission {
        // The lease holder delivers what it admits itself: only other replicas' admissions need to wake it.
        let request = Self.admission(record, window: window, notice: notify ? Self.notice(project: record.project, holder: holder) : "")
        let outcome = try await admissions.admit(
            request, round: { batch throws(StoreError) in try await self.admitAll(batch) },
            notify: { notices in await self.notify(notices) })
        return try Self.admission(of: record, outcome: outcome)
    }

    /// Admits the event only while this replica holds the lease `name` under `epoch` (fencing: a poll decided under an
    /// older epoch is refused with ``StoreError/leaseLost(_:)``, and nothing is admitted).
    package func admit(_ record: EventRecord, window: Duration, lease name: String, epoch: Int64) async throws(StoreError) -> Admission {
        let request = Self.admission(record, window: window, notice: "")
        let holder = holder
        let outcomes = try await admitting([request]) { batch throws(StoreError) in
            try await self.run("admit") { client, logger in
                try await client.withTransaction(logger: logger) { connection -> [Answer] in
                    let lease = try await connection.query(
                        """
                        SELECT 1 FROM rc_relay_leases WHERE name = \(name) AND holder = \(holder) AND epoch = \(epoch) AND expires_at > now()
                        FOR SHARE
                        """, logger: logger)
                    var held = false
                    for try await _ in lease.decode(Int.self) { held = true }
                    guard held else { throw StoreError.leaseLost(name) }
                    return try await Self.answers(of: connection.query(Self.admissionQuery(batch), logger: logger), count: batch.count)
                }
            }
        }
        return try Self.admission(of: record, outcome: outcomes[0])
    }

    /// What the holders of an event's keys (none: it was admitted) say of its admission.
    static func admission(of record: EventRecord, outcome: AdmissionBatcher.Outcome) throws(StoreError) -> Admission {
        guard case .held(let holders) = outcome else {
            if case .admitted(let id) = outcome { return .admitted(id: id) }
            throw .failed("unreachable")
        }
        // In the order of the event's keys (its project and version first), as the in-memory registry does.
        for key in record.keys {
            guard let other = holders[key] else { continue }
            guard other.fingerprint == record.fingerprint else { return .conflict(key: key) }
            guard other.settled else { return .pending(id: other.id) }
            do {
                return .settled(try JSONDecoder().decode([DeliveryReport].self, from: Data(other.reports.utf8)))
            } catch {
                throw .failed("the reports of the event could not be read: \(error)")
            }
        }
        throw .unavailable("the event changed while it was admitted; retry")
    }

    /// The event as the admission statement takes it; `notice` empty for none. Its first key is its project and
    /// version's; an id's kind is read from its key (`webhook/…` for a `webhook-id`).
    static func admission(_ record: EventRecord, window: Duration, notice: String) -> AdmissionBatcher.Request {
        let others = record.keys.dropFirst()
        let webhookKey = others.first { $0.hasPrefix("webhook/") } ?? ""
        let idKey = others.first { !$0.hasPrefix("webhook/") } ?? ""
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let keys = (try? encoder.encode(record.keys)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        return AdmissionBatcher.Request(
            project: record.project, version: record.version.versionNumber, versionKey: record.keys.first ?? "", idKey: idKey,
            webhookKey: webhookKey, keys: keys, record: record.jsonText, window: seconds(window), notice: notice)
    }

    /// What the admission statement said of one request: its new row, or the rows holding its keys (and which of them
    /// are settled past their window, to forget before it is admitted again).
    struct Answer: Sendable {
        var added: Int64?
        var holders: [String: AdmissionBatcher.Holder] = [:]
        var expired: [Int64] = []
    }

    /// One round of admissions: one statement, one transaction. Holders settled past their window are forgotten and
    /// their keys taken again, and a key whose holder committed after the statement's snapshot is asked for again:
    /// both are rare, and a round trip each.
    func admitAll(_ batch: [AdmissionBatcher.Request]) async throws(StoreError) -> [AdmissionBatcher.Outcome] {
        try await admitting(batch) { requests throws(StoreError) in
            try await self.run("admit") { client, logger in
                try await Self.answers(of: client.query(Self.admissionQuery(requests), logger: logger), count: requests.count)
            }
        }
    }

    /// Runs `round` on the requests until each is admitted or held by a live row (at most three times).
    func admitting(
        _ batch: [AdmissionBatcher.Request], round: ([AdmissionBatcher.Request]) async throws(StoreError) -> [Answer]
    ) async throws(StoreError) -> [AdmissionBatcher.Outcome] {
        var outcomes = [AdmissionBatcher.Outcome?](repeating: nil, count: batch.count)
        var left = Array(batch.indices)
        for _ in 0..<3 where !left.isEmpty {
            let answers = try await round(left.map { batch[$0] })
            var expired: [Int64] = []
            var again: [Int] = []
            for (position, answer) in zip(left, answers) {
                if let id = answer.added {
                    outcomes[position] = .admitted(id)
                } else if !answer.expired.isEmpty || answer.holders.isEmpty {
                    expired += answer.expired
                    again.append(position)
                } else {
                    outcomes[position] = .held(answer.holders)
                }
            }
            if !expired.isEmpty { try await forget(expired) }
            left = again
        }
        guard left.isEmpty else { throw .unavailable("the event changed while it was admitted; retry") }
        return outcomes.compactMap { $0 }
    }

    /// The admission of a round: every event inserted in one statement, in the order of their version keys (two
    /// replicas admitting the same events take their keys in the same order, so neither waits for the other in a
    /// cycle); for each event not inserted, the rows that hold its keys.
    static func admissionQuery(_ batch: [AdmissionBatcher.Request]) -> PostgresQuery {
        let (projects, versions) = (batch.map(\.project), batch.map(\.version))
        let (versionKeys, idKeys, webhookKeys) = (batch.map(\.versionKey), batch.map(\.idKey), batch.map(\.webhookKey))
        let (keys, records, windows) = (batch.map(\.keys), batch.map(\.record), batch.map(\.window))
        return """
            WITH input AS (
                SELECT * FROM unnest(\(projects)::text[], \(versions)::bigint[], \(versionKeys)::text[], \(idKeys)::text[],
                    \(webhookKeys)::text[], \(keys)::text[], \(records)::text[], \(windows)::float8[])
                    WITH ORDINALITY AS i(project, version, key_version, key_id, key_webhook, keys, record, window_seconds, item)),
            hashed AS (
                SELECT i.*, rc_relay_key(i.key_version) AS kv, rc_relay_key(nullif(i.key_id, '')) AS ki,
                    rc_relay_key(nullif(i.key_webhook, '')) AS kw
                FROM input i),
            added AS (
                INSERT INTO rc_relay_outbox (project, version, key_version, key_id, key_webhook, keys, record, window_seconds)
                SELECT project, version, kv, ki, kw, keys, record, window_seconds FROM hashed ORDER BY kv
                ON CONFLICT DO NOTHING
                RETURNING id, key_version)
            SELECT h.item::integer, a.id, o.id,
                CASE WHEN o.key_version = h.kv THEN h.key_version WHEN o.key_id = h.ki THEN h.key_id ELSE h.key_webhook END,
                o.project || '/' || o.version, o.settled, coalesce(o.reports, '[]'),
                coalesce(o.settled AND o.settled_at < now() - make_interval(secs => o.window_seconds), false)
            FROM hashed h
            LEFT JOIN added a ON a.key_version = h.kv
            LEFT JOIN rc_relay_outbox o ON a.id IS NULL AND (o.key_version = h.kv OR o.key_id = h.ki OR o.key_webhook = h.kw)
            """
    }

    /// The admission statement's rows, per request.
    static func answers(of rows: PostgresRowSequence, count: Int) async throws -> [Answer] {
        var answers = [Answer](repeating: Answer(), count: count)
        for try await (item, added, holder, key, fingerprint, settled, reports, expired) in rows.decode(
            (Int, Int64?, Int64?, String?, String?, Bool?, String?, Bool?).self)
        {
            guard answers.indices.contains(item - 1) else { throw StoreError.failed("the admission answered for event \(item) of \(count)") }
            if let added { answers[item - 1].added = added }
            guard let holder, let key, let fingerprint, let settled, let reports else { continue }
            if expired == true {
                answers[item - 1].expired.append(holder)
            } else {
                answers[item - 1].holders[key] = AdmissionBatcher.Holder(id: holder, fingerprint: fingerprint, settled: settled, reports: reports)
            }
        }
        return answers
    }

    /// Forgets settled rows past their window that hold a key an admission wants.
    func forget(_ expired: [Int64]) async throws(StoreError) {
        try await run("admit") { client, logger in
            try await client.query(
                """
                DELETE FROM rc_relay_outbox
                WHERE id = ANY(\(expired)::bigint[]) AND settled AND settled_at < now() - make_interval(secs => window_seconds)
                """, logger: logger)
        }
    }

    /// Wakes the lease holders of the projects named in `notices`, after the admissions' commit. One lost (the
    /// database went away in between) is found by the holder's periodic sweep.
    func notify(_ notices: [String]) async {
        do {
            try await run("notify") { client, logger in
                try await client.query("SELECT pg_notify(\(Self.channel), n) FROM unnest(\(notices)::text[]) AS n", logger: logger)
            }
        } catch {
            logger.debug("admission notices not sent; the lease holders' sweep finds the events", metadata: ["error": "\(error)"])
        }
    }

    /// Records progress (shards accepted, the routes still due at a stop) of an event still pending, in its row.
    package func update(_ record: EventRecord) async throws(StoreError) {
        let (json, id, key) = (record.jsonText, record.outboxID ?? 0, record.keys.first ?? "")
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
                    SELECT id, coalesce(record, '') FROM rc_relay_outbox WHERE project = \(project) AND NOT settled AND id > \(cursor)
                    ORDER BY id LIMIT \(pageSize)
                    """, logger: logger)
                var page: [(Int64, String)] = []
                for try await row in rows.decode((Int64, String).self) { page.append(row) }
                return page
            }
            for (id, text) in page {
                // A row this relay cannot read (written by hand, or by a newer rc-relay) is skipped, never trapped on.
                guard var record = try? JSONDecoder().decode(EventRecord.self, from: Data(text.utf8)), record.defect == nil else {
                    logger.error("outbox row skipped: it is not an event this relay can read", metadata: ["project": "\(project)"])
                    continue
                }
                record.outboxID = id
                records.append(record)
            }
            guard page.count == pageSize, let last = page.last?.0 else { return records }
            after = last
        }
    }

    /// Forgets what no guarantee needs any more, on one replica at a time (an advisory lock; the others skip the round):
    /// settled events past their own deduplication window, the pending events of a project no replica has held for
    /// ``abandonedAfter`` (its configuration is gone), and all but the newest `keepPings` entries of the delivery
    /// history. Only rows received more than `window` ago are looked at, oldest first. Returns how many rows went.
    @discardableResult
    package func prune(window: Duration, keepPings: Int = 1000) async throws(StoreError) -> Int {
        let seconds = Self.seconds(window)
        let abandoned = Self.seconds(Self.abandonedAfter)
        return try await run("prune") { client, logger in
            try await client.withTransaction(logger: logger) { connection -> Int in
                let lock = try await connection.query("SELECT pg_try_advisory_xact_lock(\(Self.pruneLock))", logger: logger)
                var locked = false
                for try await taken in lock.decode(Bool.self) { locked = taken }
                guard locked else { return 0 }
                var removed = 0
                let rows = try await connection.query(
                    """
                    WITH bound AS (
                        SELECT coalesce(
                            (SELECT id FROM rc_relay_outbox WHERE received_at >= now() - make_interval(secs => \(seconds)) ORDER BY id LIMIT 1),
                            9223372036854775807) AS id)
                    DELETE FROM rc_relay_outbox o USING bound
                    WHERE o.id < bound.id AND (
                        (o.settled AND o.settled_at < now() - make_interval(secs => o.window_seconds))
                        OR (NOT o.settled AND o.received_at < now() - make_interval(secs => \(abandoned)) AND NOT EXISTS (
                            SELECT 1 FROM rc_relay_leases l WHERE l.name = 'project/' || o.project AND l.expires_at > now())))
                    RETURNING o.settled, o.project, o.version
                    """, logger: logger)
                for try await (settled, project, version) in rows.decode((Bool, String, Int64).self) {
                    removed += 1
                    if !settled {
                        logger.error(
                            "pending event given up: no replica has held its project for a day",
                            metadata: ["project": "\(project)", "version": "\(version)"])
                    }
                }
                let pings = try await connection.query(
                    """
                    DELETE FROM rc_relay_pings WHERE seq <= (
                        SELECT seq FROM rc_relay_pings ORDER BY seq DESC OFFSET \(keepPings) LIMIT 1) RETURNING 1
                    """, logger: logger)
                for try await _ in pings.decode(Int.self) { removed += 1 }
                return removed
            }
        }
    }

    /// How long a project's pending events wait for a replica that holds it before they are given up.
    package static let abandonedAfter = Duration.seconds(86_400)

    /// The key of the advisory lock a pruning replica holds.
    static let pruneLock: Int64 = 0x7263_7072_756E_65
}
