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
        // The keys' hashes are taken here, not by `rc_relay_key` in the statement: PostgreSQL does not inline that
        // function (`convert_to` is not immutable): three calls a webhook, 186 ms in an 8 s load (docs/performance.md).
        let hashes = (versionKeys.map(hashed), idKeys.map(hashed), webhookKeys.map(hashed))
        return """
            WITH input AS (
                SELECT * FROM unnest(\(projects)::text[], \(versions)::bigint[], \(versionKeys)::text[], \(idKeys)::text[],
                    \(webhookKeys)::text[], \(keys)::text[], \(records)::text[], \(windows)::float8[], \(hashes.0)::text[],
                    \(hashes.1)::text[], \(hashes.2)::text[])
                    WITH ORDINALITY AS i(project, version, key_version, key_id, key_webhook, keys, record, window_seconds, hv, hi, hw,
                        item)),
            hashed AS (
                SELECT i.*, i.hv::uuid AS kv, nullif(i.hi, '')::uuid AS ki, nullif(i.hw, '')::uuid AS kw
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

    /// A key's fixed-width identity, as `rc_relay_key` computes it: the first 16 bytes of the SHA-256 of its UTF-8, as
    /// a UUID's text; empty for no key.
    static func hashed(_ key: String) -> String {
        guard !key.isEmpty else { return "" }
        let d = Array(SHA256.hash(data: Array(key.utf8)))
        return UUID(uuid: (d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11], d[12], d[13], d[14], d[15])).uuidString
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
}
