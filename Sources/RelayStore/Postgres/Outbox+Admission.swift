import Crypto
import DeliveryEngine
import Foundation
import PostgresNIO

/// Admission's statement: a round of events inserted as one row each, and the holders of the keys of those that were
/// not.
extension PostgresStore {
    /// What the holders of an event's keys (none: it was admitted) say of its admission.
    static func admission(of record: EventRecord, outcome: AdmissionBatcher.Outcome) throws(StoreError) -> OutboxAdmission {
        let holders: [String: AdmissionBatcher.Holder]
        switch outcome {
        case .admitted(let id): return .admitted(id: id)
        case .held(let held): holders = held
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
        let webhookKey = others.first { $0.hasPrefix(EventRecord.webhookKeyPrefix) } ?? ""
        let idKey = others.first { !$0.hasPrefix(EventRecord.webhookKeyPrefix) } ?? ""
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        let keys = (try? encoder.encode(record.keys)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        return AdmissionBatcher.Request(
            project: record.project, version: record.version.versionNumber, versionKey: record.keys.first ?? "", idKey: idKey,
            webhookKey: webhookKey, keys: keys, record: record.jsonTextForRow, window: seconds(window), notice: notice)
    }

    /// What the admission statement said of one request: its new row, or the rows holding its keys (and which of them
    /// are settled past their window, to forget before it is admitted again).
    struct Answer: Sendable {
        var added: Int64?
        var holders: [String: AdmissionBatcher.Holder] = [:]
        var expired: [Int64] = []
    }

    /// One round of admissions: one statement, one commit, and only when some event was not inserted (a key of its is
    /// taken), a second to read who holds its keys. Holders settled past their window are forgotten and their keys
    /// taken again, and a key whose holder went in between is asked for again: both are rare, and a round trip each.
    func admitAll(_ batch: [AdmissionBatcher.Request]) async throws(StoreError) -> [AdmissionBatcher.Outcome] {
        try await admitting(batch) { requests throws(StoreError) in
            try await self.run("admit") { client, logger in
                try await Self.answers(to: requests) { query in try await client.query(query, logger: logger) }
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

    /// A round's answers, through `query` (a client's, or a connection's in a transaction): the insert, then, for the
    /// events not inserted, the rows holding their keys.
    static func answers(
        to batch: [AdmissionBatcher.Request], query: (PostgresQuery) async throws -> PostgresRowSequence
    ) async throws -> [Answer] {
        // The keys' hashes are taken here, not by `rc_relay_key` in the statement: PostgreSQL does not inline that
        // function (`convert_to` is not immutable): three calls a webhook, 186 ms in an 8 s load (docs/performance.md).
        let hashes = batch.map { (version: hashed($0.versionKey), id: hashed($0.idKey), webhook: hashed($0.webhookKey)) }
        var answers = [Answer](repeating: Answer(), count: batch.count)
        // No two events of a round share a key (``AdmissionBatcher/nextRound(_:)``): a version key names one event.
        var byVersionKey: [UUID: Int] = [:]
        for (index, hash) in hashes.enumerated() {
            if let key = UUID(uuidString: hash.version) { byVersionKey[key] = index }
        }
        for try await (key, id) in try await query(insertion(batch, hashes: hashes)).decode((UUID, Int64).self) {
            guard let index = byVersionKey[key] else { throw StoreError.failed("the admission inserted an event it was not given") }
            answers[index].added = id
        }
        let held = batch.indices.filter { answers[$0].added == nil }
        guard !held.isEmpty else { return answers }
        let rows = try await query(holdersQuery(held.map { batch[$0] }, hashes: held.map { hashes[$0] }))
        for (position, answer) in try await holders(of: rows, count: held.count).enumerated() {
            answers[held[position]] = answer
        }
        return answers
    }

    /// The round's insert: every event whose keys are all free gets its row, in the order of their version keys' hashes
    /// (two replicas admitting the same events take their keys in the same order, so neither waits for the other in a
    /// cycle). It answers the rows it added, by version key. Kept this small because PostgreSQL plans it at every round:
    /// the holders' join in the same statement cost four times its planning (docs/performance.md).
    static func insertion(_ batch: [AdmissionBatcher.Request], hashes: [(version: String, id: String, webhook: String)]) -> PostgresQuery {
        let (projects, versions, keys, records, windows) = (
            batch.map(\.project), batch.map(\.version), batch.map(\.keys), batch.map(\.record), batch.map(\.window)
        )
        let (versionHashes, idHashes, webhookHashes) = (hashes.map(\.version), hashes.map(\.id), hashes.map(\.webhook))
        return """
            INSERT INTO rc_relay_outbox (project, version, key_version, key_id, key_webhook, keys, record, window_seconds)
            SELECT project, version, hv::uuid, nullif(hi, '')::uuid, nullif(hw, '')::uuid, keys, record, window_seconds
            FROM unnest(\(projects)::text[], \(versions)::bigint[], \(versionHashes)::text[], \(idHashes)::text[],
                \(webhookHashes)::text[], \(keys)::text[], \(records)::text[], \(windows)::float8[])
                AS i(project, version, hv, hi, hw, keys, record, window_seconds)
            ORDER BY hv::uuid
            ON CONFLICT DO NOTHING
            RETURNING key_version, id
            """
    }

    /// For each event not inserted, the rows that hold its keys (committed by now: the insert waited for them), and
    /// which of them are settled past their window.
    static func holdersQuery(_ batch: [AdmissionBatcher.Request], hashes: [(version: String, id: String, webhook: String)]) -> PostgresQuery {
        let (versionKeys, idKeys, webhookKeys) = (batch.map(\.versionKey), batch.map(\.idKey), batch.map(\.webhookKey))
        let (versionHashes, idHashes, webhookHashes) = (hashes.map(\.version), hashes.map(\.id), hashes.map(\.webhook))
        return """
            WITH h AS (
                SELECT u.*, u.hv::uuid AS kv, nullif(u.hi, '')::uuid AS ki, nullif(u.hw, '')::uuid AS kw
                FROM unnest(\(versionKeys)::text[], \(idKeys)::text[], \(webhookKeys)::text[], \(versionHashes)::text[],
                    \(idHashes)::text[], \(webhookHashes)::text[]) WITH ORDINALITY AS u(key_version, key_id, key_webhook, hv, hi, hw, item))
            SELECT h.item::integer, o.id,
                CASE WHEN o.key_version = h.kv THEN h.key_version WHEN o.key_id = h.ki THEN h.key_id ELSE h.key_webhook END,
                o.project || '/' || o.version, o.settled, coalesce(o.reports, '[]'),
                coalesce(o.settled AND o.settled_at < now() - make_interval(secs => o.window_seconds), false)
            FROM h JOIN rc_relay_outbox o ON o.key_version = h.kv OR o.key_id = h.ki OR o.key_webhook = h.kw
            """
    }

    /// A key's fixed-width identity, as `rc_relay_key` computes it: the first 16 bytes of the SHA-256 of its UTF-8, as
    /// a UUID's text; empty for no key.
    static func hashed(_ key: String) -> String {
        guard !key.isEmpty else { return "" }
        let d = Array(SHA256.hash(data: Array(key.utf8)))
        return UUID(uuid: (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15])).uuidString
    }

    /// The holders' rows, per event asked about.
    static func holders(of rows: PostgresRowSequence, count: Int) async throws -> [Answer] {
        var answers = [Answer](repeating: Answer(), count: count)
        for try await (item, holder, key, fingerprint, settled, reports, expired) in rows.decode(
            (Int, Int64, String, String, Bool, String, Bool).self)
        {
            guard answers.indices.contains(item - 1) else { throw StoreError.failed("the admission answered for event \(item) of \(count)") }
            if expired {
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
}
