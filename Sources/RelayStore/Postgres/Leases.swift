import DeliveryEngine
import Foundation
import PostgresNIO

/// Leases: a named claim one replica holds until it expires, renewed while the replica lives. Times are the
/// database's (`now()`), so replicas whose clocks disagree still agree on who holds what. Each take-over increases the
/// lease's epoch (a trigger, migration 6): work decided under an older epoch is refused (``confirm(_:epoch:)``).
extension PostgresStore {
    /// Takes each lease that is free or expired and renews each this replica holds, in one statement whatever their
    /// number; returns the epoch of each lease held now (the others are another replica's).
    package func renew(_ names: [String], for duration: Duration) async throws(StoreError) -> [String: Int64] {
        // Sorted and unique: concurrent renewals lock rows in one order, and no row is updated twice by one statement.
        let names = Array(Set(names)).sorted()
        guard !names.isEmpty else { return [:] }
        let seconds = Self.seconds(duration)
        let holder = holder
        return try await run("acquire") { client, logger in
            let rows = try await client.query(
                """
                INSERT INTO rc_relay_leases (name, holder, expires_at)
                SELECT n, \(holder), now() + make_interval(secs => \(seconds)) FROM unnest(\(names)::text[]) AS n
                ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                WHERE rc_relay_leases.holder = EXCLUDED.holder OR rc_relay_leases.expires_at < now()
                RETURNING name, epoch
                """, logger: logger)
            var held: [String: Int64] = [:]
            for try await (name, epoch) in rows.decode((String, Int64).self) { held[name] = epoch }
            return held
        }
    }

    /// Takes the lease if it is free or expired, or renews it if this replica holds it; false when another does.
    package func acquire(_ name: String, for duration: Duration) async throws(StoreError) -> Bool {
        try await renew([name], for: duration)[name] != nil
    }

    /// Whether this replica still holds the lease under `epoch` (nobody took it over since), by the database's clock:
    /// the time it has left, or nil when it does not hold it.
    package func confirm(_ name: String, epoch: Int64) async throws(StoreError) -> Duration? {
        let holder = holder
        return try await run("fence") { client, logger in
            let rows = try await client.query(
                """
                SELECT extract(epoch FROM expires_at - now())::float8 FROM rc_relay_leases
                WHERE name = \(name) AND holder = \(holder) AND epoch = \(epoch) AND expires_at > now()
                """,
                logger: logger)
            for try await left in rows.decode(Double.self) { return .milliseconds(Int64(max(0, left) * 1000)) }
            return nil
        }
    }

    /// Gives the lease up (on a graceful stop), so another replica takes over at once. The row stays, expired, so its
    /// epoch keeps counting.
    package func release(_ name: String) async throws(StoreError) {
        let holder = holder
        try await run("release") { client, logger in
            try await client.query(
                "UPDATE rc_relay_leases SET expires_at = '-infinity' WHERE name = \(name) AND holder = \(holder)", logger: logger)
        }
    }

    /// Who holds each unexpired lease.
    package func holders() async throws(StoreError) -> [String: String] {
        try await run("holders") { client, logger in
            var holders: [String: String] = [:]
            let rows = try await client.query("SELECT name, holder FROM rc_relay_leases WHERE expires_at > now()", logger: logger)
            for try await (name, holder) in rows.decode((String, String).self) { holders[name] = holder }
            return holders
        }
    }

    // MARK: - The newest version relayed per project

    /// The newest version relayed for the project, by any replica; nil when none is on record.
    package func relayed(project: String) async throws(StoreError) -> Int64? {
        try await run("marks") { client, logger in
            let rows = try await client.query("SELECT relayed FROM rc_relay_marks WHERE project = \(project)", logger: logger)
            for try await version in rows.decode(Int64?.self) { return version }
            return nil
        }
    }

    /// Notes that `version` was relayed (or adopted); an older version changes nothing.
    package func noteRelayed(project: String, version: Int64) async throws(StoreError) {
        try await run("marks") { client, logger in
            try await client.query(
                """
                INSERT INTO rc_relay_marks (project, relayed) VALUES (\(project), \(version))
                ON CONFLICT (project) DO UPDATE SET relayed = EXCLUDED.relayed, updated_at = now()
                WHERE rc_relay_marks.relayed IS NULL OR rc_relay_marks.relayed < EXCLUDED.relayed
                """, logger: logger)
        }
    }

    /// Forgets the project's mark (an operator's reset: the next poll adopts Remote Config's current version) and
    /// raises its reset generation, which every replica applies (``resetGenerations(projects:)``). Returns the new
    /// generation.
    @discardableResult
    package func resetRelayed(project: String) async throws(StoreError) -> Int64 {
        try await run("marks") { client, logger in
            let rows = try await client.query(
                """
                INSERT INTO rc_relay_marks (project, relayed, generation, reset_at) VALUES (\(project), NULL, 1, now())
                ON CONFLICT (project) DO UPDATE
                SET relayed = NULL, generation = rc_relay_marks.generation + 1, reset_at = now(), updated_at = now()
                RETURNING generation
                """, logger: logger)
            for try await generation in rows.decode(Int64.self) { return generation }
            throw StoreError.failed("the reset returned no generation")
        }
    }

    /// The reset generation of each of `projects` ever reset, in one statement.
    package func resetGenerations(projects: [String]) async throws(StoreError) -> [String: Int64] {
        guard !projects.isEmpty else { return [:] }
        return try await run("marks") { client, logger in
            let rows = try await client.query(
                "SELECT project, generation FROM rc_relay_marks WHERE generation > 0 AND project = ANY(\(projects)::text[])", logger: logger)
            var generations: [String: Int64] = [:]
            for try await (project, generation) in rows.decode((String, Int64).self) { generations[project] = generation }
            return generations
        }
    }

    /// The newest pings FCM accepted for the project, from the shared history: a replica that takes the lease over
    /// lets an older version's ping stand down where a newer one went already (``DeliveryEngine/noteAccepted(_:)``).
    package func acceptedPings(project: String, limit: Int = 1000) async throws(StoreError) -> [DeliveryHistory.Entry] {
        try await run("pings") { client, logger in
            let rows = try await client.query(
                """
                SELECT entry FROM rc_relay_pings
                WHERE project = \(project) AND status = 'accepted'
                    AND updated_at > coalesce((SELECT reset_at FROM rc_relay_marks WHERE project = \(project)), '-infinity')
                ORDER BY seq DESC LIMIT \(limit)
                """,
                logger: logger)
            var found: [DeliveryHistory.Entry] = []
            for try await text in rows.decode(String.self) {
                if let entry = Self.entry(text) { found.append(entry) }
            }
            return found
        }
    }
}
