import DeliveryEngine
import Foundation
import PostgresNIO

/// The delivery history every replica writes and the admin API reads (`rc_relay_pings`): the engine keeps its own
/// history in memory, and copies each entry's changes here through the outbox's queue, in batches.
extension PostgresStore {
    /// Writes the entries, each by its id (a newer copy of an entry replaces the older).
    func journal(_ entries: [DeliveryHistory.Entry]) async throws(StoreError) {
        var (ids, projects, routes, versions, statuses, texts) = ([String](), [String](), [String](), [Int64](), [String](), [String]())
        for entry in entries {
            ids.append(entry.id)
            projects.append(entry.project)
            routes.append(entry.route)
            versions.append(entry.version.versionNumber)
            statuses.append(Self.status(entry))
            texts.append(entry.jsonText)
        }
        guard !ids.isEmpty else { return }
        let rows = (ids, projects, routes, versions, statuses, texts)
        try await run("journal") { client, logger in
            try await client.query(
                """
                INSERT INTO rc_relay_pings (id, project, route, version, status, entry)
                SELECT * FROM unnest(\(rows.0)::text[], \(rows.1)::text[], \(rows.2)::text[], \(rows.3)::bigint[], \(rows.4)::text[], \(rows.5)::text[])
                ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, entry = EXCLUDED.entry, updated_at = now()
                """, logger: logger)
        }
    }

    /// The entries that match, newest first: by when the store first had each (replicas write in batches, so pings
    /// that started within a few milliseconds on two replicas may be listed in either order).
    func pings(_ filter: DeliveryHistory.Filter) async throws(StoreError) -> [DeliveryHistory.Entry] {
        let (status, route, project, version, limit) = (filter.status, filter.route, filter.project, filter.version, filter.limit)
        return try await run("pings") { client, logger in
            let rows = try await client.query(
                """
                SELECT entry FROM rc_relay_pings
                WHERE (\(status)::text IS NULL OR status = \(status)) AND (\(route)::text IS NULL OR route = \(route))
                    AND (\(project)::text IS NULL OR project = \(project)) AND (\(version)::bigint IS NULL OR version = \(version))
                ORDER BY seq DESC LIMIT \(limit)
                """, logger: logger)
            var entries: [DeliveryHistory.Entry] = []
            for try await text in rows.decode(String.self) {
                if let entry = Self.entry(text) { entries.append(entry) }
            }
            return entries
        }
    }

    /// One entry, whichever replica wrote it.
    func ping(_ id: String) async throws(StoreError) -> DeliveryHistory.Entry? {
        try await run("pings") { client, logger in
            let rows = try await client.query("SELECT entry FROM rc_relay_pings WHERE id = \(id)", logger: logger)
            for try await text in rows.decode(String.self) { return Self.entry(text) }
            return nil
        }
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
}

/// The delivery history of every replica, for the admin API and the console.
///
/// What this replica recorded is written before each read (within a second; past it the read goes on without it),
/// so an operator who just sent a webhook here finds its pings.
package struct SharedDeliveryLog: DeliveryLog {
    let store: PostgresStore

    package init(store: PostgresStore) { self.store = store }

    package func list(_ filter: DeliveryHistory.Filter) async throws -> [DeliveryHistory.Entry] {
        _ = await store.flush(within: .seconds(1))
        return try await store.pings(filter)
    }

    package func entry(_ id: String) async throws -> DeliveryHistory.Entry? {
        _ = await store.flush(within: .seconds(1))
        return try await store.ping(id)
    }
}
