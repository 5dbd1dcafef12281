import DeliveryEngine
import Foundation
import PostgresNIO

/// Leases: a named claim one replica holds while its heartbeat (one row per replica, migration 8) does not expire, so
/// an idle renewal writes one row whatever the number of projects. Times are the database's (`now()`), so replicas
/// whose clocks disagree still agree on who holds what. Each take-over increases the lease's epoch (a trigger,
/// migration 6): work decided under an older epoch is refused (``confirm(_:epoch:)``).
extension PostgresStore {
    /// What an idle renewal learns in one statement: whether this replica's heartbeat still stands (false: another
    /// replica found it expired and took or freed its leases), the count of lease frees so far, and whether a replica's
    /// heartbeat has expired or a lease is free by time (an older replica's lapsed).
    package struct Heartbeat: Sendable, Equatable {
        package var alive: Bool
        package var frees: Int64
        package var somethingToTake: Bool
    }

    /// Renews this replica's heartbeat, which every lease it holds counts on: one row, whatever the number of projects.
    /// The caller takes leases (``renew(_:for:)``) when it is not alive, when ``Heartbeat/frees`` moved, when
    /// something is there to take, or when its projects changed.
    package func beat(for duration: Duration) async throws(StoreError) -> Heartbeat {
        let (seconds, holder) = (Self.seconds(duration), holder)
        return try await run("heartbeat") { client, logger in
            let rows = try await client.query(
                """
                WITH beat AS (
                    UPDATE rc_relay_replicas SET expires_at = now() + make_interval(secs => \(seconds)) WHERE holder = \(holder)
                    RETURNING 1)
                SELECT EXISTS (SELECT 1 FROM beat), (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM rc_relay_lease_frees),
                    EXISTS (SELECT 1 FROM rc_relay_replicas WHERE expires_at < now() AND holder <> \(holder))
                    OR EXISTS (SELECT 1 FROM rc_relay_leases WHERE expires_at <> 'infinity' AND expires_at > '-infinity' AND expires_at < now())
                """, logger: logger)
            for try await (alive, frees, toTake) in rows.decode((Bool, Int64, Bool).self) {
                return Heartbeat(alive: alive, frees: frees, somethingToTake: toTake)
            }
            throw StoreError.failed("the heartbeat returned nothing")
        }
    }

    /// Renews this replica's heartbeat (registering it when it is new, or was found expired), takes each of `names`
    /// that is free, frees the leases of replicas whose heartbeat expired (and, with `freeingOthers`, those this
    /// replica holds but no longer names: projects taken out of its configuration), and returns the epoch of each of `names` it holds now (the others are another replica's). One transaction
    /// whatever the number of names, under an advisory lock that every take holds: a replica found expired is deleted
    /// here, before its leases are freed, so its own next heartbeat finds nothing and it cannot revive a lease that
    /// moved (docs/replicas.md, who delivers).
    package func renew(_ names: [String], for duration: Duration, freeingOthers: Bool = false) async throws(StoreError) -> [String: Int64] {
        // Sorted and unique: concurrent takes lock rows in one order, and no row is updated twice by one statement.
        let names = Array(Set(names)).sorted()
        let (seconds, holder) = (Self.seconds(duration), holder)
        return try await run("acquire") { client, logger in
            try await client.withTransaction(logger: logger) { connection -> [String: Int64] in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.leaseLock))", logger: logger)
                // Replicas whose heartbeat expired, and older replicas' leases that lapsed, free what they held; and
                // this replica's leases of projects it no longer serves are freed too.
                let freed = try await connection.query(
                    """
                    WITH dead AS (DELETE FROM rc_relay_replicas WHERE expires_at < now() AND holder <> \(holder) RETURNING holder),
                    freed AS (
                        UPDATE rc_relay_leases SET expires_at = '-infinity'
                        WHERE (expires_at = 'infinity' AND (holder IN (SELECT holder FROM dead)
                                OR NOT EXISTS (SELECT 1 FROM rc_relay_replicas r WHERE r.holder = rc_relay_leases.holder)))
                            OR (expires_at <> 'infinity' AND expires_at > '-infinity' AND expires_at < now())
                            OR (\(freeingOthers) AND expires_at = 'infinity' AND holder = \(holder) AND NOT name = ANY(\(names)::text[]))
                        RETURNING 1)
                    SELECT count(*) FROM freed
                    """, logger: logger)
                var count = 0
                for try await n in freed.decode(Int.self) { count = n }
                if count > 0 { try await connection.query("SELECT nextval('rc_relay_lease_frees')", logger: logger) }
                try await connection.query(
                    """
                    INSERT INTO rc_relay_replicas (holder, expires_at) VALUES (\(holder), now() + make_interval(secs => \(seconds)))
                    ON CONFLICT (holder) DO UPDATE SET expires_at = EXCLUDED.expires_at
                    """, logger: logger)
                guard !names.isEmpty else { return [:] }
                try await connection.query(
                    """
                    INSERT INTO rc_relay_leases (name, holder, expires_at) SELECT n, \(holder), 'infinity' FROM unnest(\(names)::text[]) AS n
                    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = 'infinity'
                    WHERE rc_relay_leases.expires_at < now()
                    """, logger: logger)
                let rows = try await connection.query(
                    """
                    SELECT name, epoch FROM rc_relay_leases
                    WHERE holder = \(holder) AND expires_at = 'infinity' AND name = ANY(\(names)::text[])
                    """, logger: logger)
                var held: [String: Int64] = [:]
                for try await (name, epoch) in rows.decode((String, Int64).self) { held[name] = epoch }
                return held
            }
        }
    }

    /// Takes the lease if it is free, or renews it if this replica holds it; false when another does.
    package func acquire(_ name: String, for duration: Duration) async throws(StoreError) -> Bool {
        try await renew([name], for: duration)[name] != nil
    }

    /// The key of the advisory lock every take of leases holds.
    static let leaseLock: Int64 = 0x7263_7265_6C61_7A

    /// Whether this replica still holds the lease under `epoch` (nobody took it over since), by the database's clock:
    /// the time it has left (its heartbeat's), or nil when it does not hold it.
    package func confirm(_ name: String, epoch: Int64) async throws(StoreError) -> Duration? {
        let holder = holder
        return try await run("fence") { client, logger in
            let rows = try await client.query(
                """
                SELECT extract(epoch FROM expires_at - now())::float8 FROM rc_relay_held
                WHERE name = \(name) AND holder = \(holder) AND epoch = \(epoch)
                """,
                logger: logger)
            for try await left in rows.decode(Double.self) { return .milliseconds(Int64(max(0, left) * 1000)) }
            return nil
        }
    }

    /// Gives the leases up (on a graceful stop), so another replica takes over at its next renewal, and ends this
    /// replica's heartbeat. The rows stay, free, so their epochs keep counting. One statement whatever their number.
    package func release(_ names: [String]) async throws(StoreError) {
        let holder = holder
        try await run("release") { client, logger in
            try await client.withTransaction(logger: logger) { connection in
                try await connection.query(
                    """
                    WITH freed AS (
                        UPDATE rc_relay_leases SET expires_at = '-infinity' WHERE holder = \(holder) AND name = ANY(\(names)::text[])
                        RETURNING 1)
                    SELECT nextval('rc_relay_lease_frees') FROM (SELECT count(*) AS n FROM freed) AS f WHERE n > 0
                    """, logger: logger)
                try await connection.query(
                    """
                    DELETE FROM rc_relay_replicas WHERE holder = \(holder)
                        AND NOT EXISTS (SELECT 1 FROM rc_relay_leases WHERE holder = \(holder) AND expires_at = 'infinity')
                    """, logger: logger)
            }
        }
    }

    /// Gives one lease up.
    package func release(_ name: String) async throws(StoreError) { try await release([name]) }

    /// Who holds each lease now.
    package func holders() async throws(StoreError) -> [String: String] {
        try await run("holders") { client, logger in
            var holders: [String: String] = [:]
            let rows = try await client.query("SELECT name, holder FROM rc_relay_held", logger: logger)
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
        try await noteRelayed([project: version])
    }

    /// Notes the versions relayed of several projects (a poll's adoption, the held marks of ``MarksPace``) in one
    /// statement, each project's row taken in the projects' order; an older version changes nothing.
    func noteRelayed(_ marks: [String: Int64]) async throws(StoreError) {
        let projects = marks.keys.sorted()
        let versions = projects.map { marks[$0] ?? 0 }
        try await run("marks") { client, logger in
            try await client.query(
                """
                INSERT INTO rc_relay_marks (project, relayed)
                SELECT * FROM unnest(\(projects)::text[], \(versions)::bigint[]) AS v(project, version) ORDER BY project
                ON CONFLICT (project) DO UPDATE SET relayed = EXCLUDED.relayed, updated_at = now()
                WHERE rc_relay_marks.relayed IS NULL OR rc_relay_marks.relayed < EXCLUDED.relayed
                """, logger: logger)
        }
    }

    /// Forgets the project's mark (an operator's reset: the next poll adopts Remote Config's current version) and
    /// raises its reset generation, which every replica applies (``resetGenerations()``). Returns the new
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
            for try await generation in rows.decode(Int64.self) {
                self.marksPace.withLockedValue { $0.forget(project) }
                return generation
            }
            throw StoreError.failed("the reset returned no generation")
        }
    }

    /// The reset generation of each project ever reset, in one statement (a row per project reset, not per project
    /// configured: no list of 10,000 names each round).
    package func resetGenerations() async throws(StoreError) -> [String: Int64] {
        try await run("marks") { client, logger in
            let rows = try await client.query("SELECT project, generation FROM rc_relay_marks WHERE generation > 0", logger: logger)
            var generations: [String: Int64] = [:]
            for try await (project, generation) in rows.decode((String, Int64).self) { generations[project] = generation }
            return generations
        }
    }

    /// What a replica reads of a project it has just taken, in this order: the project's pending rows, then what FCM
    /// accepted (``acceptedPings(project:limit:)``). The previous holder's settlement of a newer version is not fenced
    /// (it records what FCM accepted) and may land at any moment: before the first read, the second finds its ping;
    /// after it, the first finds it pending, so it is planned beside the older pending versions, which stand down. Read
    /// the other way round, it could land between the two, and an older pending version would follow it. `between`
    /// runs between the reads (a test lands a settlement there).
    package func takeOverRead(
        project: String, between: @Sendable () async -> Void = {}
    ) async throws(StoreError) -> (pending: [EventRecord], accepted: [DeliveryHistory.Entry]) {
        let pending = try await self.pending(project: project)
        await between()
        return (pending, try await acceptedPings(project: project))
    }

    /// The newest pings FCM accepted for the project, from the shared history: a replica that takes the lease over
    /// lets an older version's ping stand down where a newer one went already (``DeliveryEngine/noteAccepted(_:)``).
    /// Read from both of the history's places (``pings(_:keep:)``).
    package func acceptedPings(project: String, limit: Int = 1000) async throws(StoreError) -> [DeliveryHistory.Entry] {
        let apart = try await run("pings") { client, logger in
            let rows = try await client.query(
                """
                SELECT entry FROM rc_relay_pings
                WHERE project = \(project) AND status = 'accepted'
                    AND updated_at > coalesce((SELECT reset_at FROM rc_relay_marks WHERE project = \(project)), '-infinity')
                ORDER BY received_at DESC NULLS LAST, seq DESC LIMIT \(limit)
                """,
                logger: logger)
            var found: [DeliveryHistory.Entry] = []
            for try await text in rows.decode(String.self) {
                if let entry = Self.entry(text) { found.append(entry) }
            }
            return found
        }
        let inRows = try await eventPings(project: project, version: nil, keep: nil, sinceReset: true, limit: limit) { entry in
            entry.report?.status == .accepted
        }
        return Self.merged(apart, inRows, limit: limit)
    }
}
