import DeliveryEngine
import Foundation
import PostgresNIO

/// The delivery history every replica writes and the admin API reads (`rc_relay_pings`): the engine keeps its own
/// history in memory, and copies each entry's changes here through the outbox's queue, in batches.
extension PostgresStore {
    /// Writes the entries, each by its id (a newer copy of an entry replaces the older).
    func journal(_ entries: [DeliveryHistory.Entry]) async throws(StoreError) {
        var (ids, projects, routes, versions, statuses, texts) = ([String](), [String](), [String](), [Int64](), [String](), [String]())
        var received: [Double] = []
        for entry in entries {
            ids.append(entry.id)
            projects.append(entry.project)
            routes.append(entry.route)
            versions.append(entry.version.versionNumber)
            statuses.append(Self.status(entry))
            texts.append(entry.jsonText)
            received.append(entry.receivedAt.timeIntervalSince1970)
        }
        guard !ids.isEmpty else { return }
        let rows = (ids, projects, routes, versions, statuses, texts, received)
        try await run("journal") { client, logger in
            try await client.query(
                """
                INSERT INTO rc_relay_pings (id, project, route, version, status, entry, received_at)
                SELECT i, p, r, v, s, e, to_timestamp(t) FROM unnest(\(rows.0)::text[], \(rows.1)::text[], \(rows.2)::text[],
                    \(rows.3)::bigint[], \(rows.4)::text[], \(rows.5)::text[], \(rows.6)::float8[]) AS u(i, p, r, v, s, e, t)
                ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, entry = EXCLUDED.entry, updated_at = now()
                """, logger: logger)
        }
    }

    /// The entries that match, newest first, of the history's two places: the copies apart in `rc_relay_pings` (newest
    /// `keep` kept) and those in the rows of the newest `keep` events (``merged(_:_:limit:)``). Pings of events that
    /// came in at the same moment are listed by when the store first had each (replicas write in batches, so pings
    /// that started within a few milliseconds on two replicas may be listed in either order).
    func pings(_ filter: DeliveryHistory.Filter, keep: Int) async throws(StoreError) -> [DeliveryHistory.Entry] {
        let (status, route, project, version, limit) = (filter.status, filter.route, filter.project, filter.version, filter.limit)
        let apart = try await run("pings") { client, logger in
            let rows = try await client.query(
                """
                SELECT entry FROM rc_relay_pings
                WHERE (\(status)::text IS NULL OR status = \(status)) AND (\(route)::text IS NULL OR route = \(route))
                    AND (\(project)::text IS NULL OR project = \(project)) AND (\(version)::bigint IS NULL OR version = \(version))
                ORDER BY received_at DESC NULLS LAST, seq DESC LIMIT \(limit)
                """, logger: logger)
            var entries: [DeliveryHistory.Entry] = []
            for try await text in rows.decode(String.self) {
                if let entry = Self.entry(text) { entries.append(entry) }
            }
            return entries
        }
        // Only settled copies ride an event's row.
        guard status != "pending" else { return apart }
        let inRows = try await eventPings(project: project, version: version, keep: keep, sinceReset: false, limit: limit) { entry in
            (status == nil || Self.status(entry) == status) && (route == nil || entry.route == route)
        }
        return Self.merged(apart, inRows, limit: limit)
    }

    /// The history copies kept in events' rows that `matching` takes, newest event first (within one, the last settled
    /// first), up to `limit`: among the rows of the newest `keep` events (all when nil), of the project and version
    /// when given, and settled since the project's marks were last reset when `sinceReset`. The rows are read a page at
    /// a time, and their JSON here (a `\u0000` in an error's text would stop PostgreSQL's).
    func eventPings(
        project: String?, version: Int64?, keep: Int?, sinceReset: Bool, limit: Int,
        matching: @escaping @Sendable (DeliveryHistory.Entry) -> Bool
    ) async throws(StoreError) -> [DeliveryHistory.Entry] {
        try await run("pings") { client, logger in
            var bound: Int64 = 0
            if let keep {
                let rows = try await client.query(
                    "SELECT coalesce((SELECT id FROM rc_relay_outbox ORDER BY id DESC OFFSET \(keep) LIMIT 1), 0)", logger: logger)
                for try await id in rows.decode(Int64.self) { bound = id }
            }
            var found: [DeliveryHistory.Entry] = []
            var before = Int64.max
            let page = 100
            while found.count < limit {
                let rows = try await client.query(
                    """
                    SELECT id, pings, project, reports, keys FROM rc_relay_outbox
                    WHERE pings IS NOT NULL AND id > \(bound) AND id < \(before)
                        AND (\(project)::text IS NULL OR project = \(project)) AND (\(version)::bigint IS NULL OR version = \(version))
                        AND (NOT \(sinceReset) OR settled_at > coalesce((SELECT reset_at FROM rc_relay_marks WHERE project = \(project)), '-infinity'))
                    ORDER BY id DESC LIMIT \(page)
                    """, logger: logger)
                var read = 0
                for try await (id, text, project, reports, keys) in rows.decode((Int64, String, String, String?, String?).self) {
                    (read, before) = (read + 1, id)
                    for entry in Self.entries(text, project: project, reports: reports, keys: keys).reversed()
                    where matching(entry) && found.count < limit {
                        found.append(entry)
                    }
                }
                guard read == page else { break }
            }
            return found
        }
    }

    /// One entry, whichever replica wrote it, wherever it is kept (its settled copy in its event's row first).
    func ping(_ id: String) async throws(StoreError) -> DeliveryHistory.Entry? {
        let row = DeliveryHistory.row(ofPing: id) ?? 0
        return try await run("pings") { client, logger in
            let rows = try await client.query(
                """
                SELECT 0, pings, project, reports, keys FROM rc_relay_outbox WHERE id = \(row) AND pings IS NOT NULL
                UNION ALL SELECT 1, entry, NULL, NULL, NULL FROM rc_relay_pings WHERE id = \(id)
                ORDER BY 1
                """, logger: logger)
            for try await (place, text, project, reports, keys) in rows.decode((Int, String, String?, String?, String?).self) {
                if place == 0, let entry = Self.entries(text, project: project ?? "", reports: reports, keys: keys).first(where: { $0.id == id }) {
                    return entry
                }
                if place == 1 { return Self.entry(text) }
            }
            return nil
        }
    }

    /// The two places' entries as one list, newest first (by when each ping's event came in; a ping in both is its
    /// event row's copy, the settled one), up to `limit`. Pings of events that came in at the same moment keep each
    /// place's order, those kept apart first.
    static func merged(_ apart: [DeliveryHistory.Entry], _ inRows: [DeliveryHistory.Entry], limit: Int) -> [DeliveryHistory.Entry] {
        let riding = Set(inRows.map(\.id))
        let all = apart.filter { !riding.contains($0.id) } + inRows
        let ordered = all.indices.sorted { (all[$0].receivedAt, $1) > (all[$1].receivedAt, $0) }
        return ordered.prefix(limit).map { all[$0] }
    }

    /// The entries of an event row's history copies that this relay can read (one a newer rc-relay wrote is left out),
    /// with what each left to the row put back (``RidingCopy``): the row's project, reports and `keys` (where its event
    /// id is). A copy written before schema 10 left nothing out.
    static func entries(_ text: String, project: String, reports: String?, keys: String?) -> [DeliveryHistory.Entry] {
        let rowReports = reports.flatMap { try? JSONDecoder().decode([DeliveryReport].self, from: Data($0.utf8)) } ?? []
        let copies = (try? JSONDecoder().decode([Readable<RidingCopy>].self, from: Data(text.utf8))) ?? []
        let eventID = Self.eventID(keys: keys, project: project)
        return copies.compactMap { $0.value?.entry(project: project, reports: rowReports, eventID: eventID) }
    }

    /// The event id a row's keys hold (`<project>/id/<event id>`, ``EventRecord/keys``), if any.
    static func eventID(keys: String?, project: String) -> String? {
        guard let keys, let list = try? JSONDecoder().decode([String].self, from: Data(keys.utf8)) else { return nil }
        let prefix = project + "/id/"
        return list.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    }

    /// A value, or nil where it cannot be read, so one unreadable entry does not hide its neighbours.
    private struct Readable<Value: Decodable>: Decodable {
        let value: Value?
        init(from decoder: any Decoder) throws { value = try? Value(from: decoder) }
    }

    /// A row's entry; nil for a row this relay cannot read (a newer rc-relay wrote it), which is left out, never
    /// trapped on.
    static func entry(_ text: String) -> DeliveryHistory.Entry? {
        try? JSONDecoder().decode(DeliveryHistory.Entry.self, from: Data(text.utf8))
    }

    /// The admin API's status of an entry.
    static func status(_ entry: DeliveryHistory.Entry) -> String { entry.report?.status.rawValue ?? "pending" }
}

/// The history copies of one round of changes: the newest copy of each entry, in the order entries first appeared (one
/// statement may not change a row twice).
struct JournalBatch {
    private(set) var entries: [DeliveryHistory.Entry] = []
    private var index: [String: Int] = [:]

    mutating func add(_ entry: DeliveryHistory.Entry) {
        if let at = index[entry.id] {
            entries[at] = entry
        } else {
            index[entry.id] = entries.count
            entries.append(entry)
        }
    }

    /// Takes out the entries `taken` says yes to.
    mutating func remove(where taken: (DeliveryHistory.Entry) -> Bool) {
        let kept = entries.filter { !taken($0) }
        guard kept.count != entries.count else { return }
        self = JournalBatch()
        for entry in kept { add(entry) }
    }
}

/// What the store's writer knows of the history copies between rounds (only its task touches it).
struct HistoryCopies {
    /// Copies of pings of an event with a row, waiting for the event's settlement to ride it, and since when each
    /// waits (the clock's instant).
    var held = JournalBatch()
    var heldSince: [String: Duration] = [:]
    /// Pings whose pending copy is in `rc_relay_pings`: the settlement that carries their settled copy deletes it.
    var written: Set<String> = []
    /// False once the relay stops: nothing waits any more.
    var holding = true

    /// At most this many ids are remembered; past it they are forgotten (their pending rows then stay until pruned,
    /// beside the settled copy in the event's row, which a read prefers).
    static let writtenLimit = 100_000

    mutating func noteWritten(_ id: String) {
        if written.count >= Self.writtenLimit { written.removeAll() }
        written.insert(id)
    }
}

/// The delivery history of every replica, for the admin API and the console.
///
/// What this replica recorded is written before each read (within a second; past it the read goes on without it),
/// so an operator who just sent a webhook here finds its pings.
package struct SharedDeliveryLog: DeliveryLog {
    let store: PostgresStore
    /// `delivery.historySize`: how many pings are kept apart, and of how many events the pings in their rows.
    let keep: Int

    package init(store: PostgresStore, keep: Int = 1000) { (self.store, self.keep) = (store, keep) }

    package func list(_ filter: DeliveryHistory.Filter) async throws -> [DeliveryHistory.Entry] {
        _ = await store.flush(within: .seconds(1))
        return try await store.pings(filter, keep: keep)
    }

    package func entry(_ id: String) async throws -> DeliveryHistory.Entry? {
        _ = await store.flush(within: .seconds(1))
        return try await store.ping(id)
    }
}
