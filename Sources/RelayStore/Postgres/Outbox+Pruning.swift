import Foundation
import Logging
import PostgresNIO

/// What the store forgets, and when.
extension PostgresStore {
    /// Forgets what no guarantee needs any more, on one replica at a time (an advisory lock; the others skip the round):
    /// settled events past their own deduplication window, unless they are among the newest `keepPings` events (their
    /// rows hold their pings' history; past its window such a row deduplicates nothing, see ``forget(_:)``), the
    /// pending events of a project no replica has held for ``abandonedAfter`` (its configuration is gone), and all but
    /// the newest `keepPings` history copies kept apart. Only rows received more than `window` ago are looked at, oldest
    /// first. Returns how many rows went.
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
                            9223372036854775807) AS id,
                        coalesce((SELECT id FROM rc_relay_outbox ORDER BY id DESC OFFSET \(keepPings) LIMIT 1), 0) AS history)
                    DELETE FROM rc_relay_outbox o USING bound
                    WHERE o.id < bound.id AND (
                        (o.settled AND o.id <= bound.history AND o.settled_at < now() - make_interval(secs => o.window_seconds))
                        OR (NOT o.settled AND o.received_at < now() - make_interval(secs => \(abandoned)) AND NOT EXISTS (
                            SELECT 1 FROM rc_relay_held l WHERE l.name = 'project/' || o.project)))
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
