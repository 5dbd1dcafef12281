import PostgresNIO

/// Which projects have anything to deliver: the renewal's safety net for a notice lost on the way, in one statement
/// whatever the number of projects (issue #52: an idle replica's work does not grow with them).
extension PostgresStore {
    /// The projects among `projects` with an event still pending. Like a sweep, it reads only the rows past
    /// ``dueThrough``: the newest id below the first pending row of these projects, received more than ``settledLag``
    /// ago (by then no admission that took a lower id can still be uncommitted), moved forward by each call. A project
    /// asked about later whose pending rows lie below it is swept when its lease is taken, from its own cursor.
    package func projectsWithPending(_ projects: [String]) async throws(StoreError) -> Set<String> {
        guard !projects.isEmpty else { return [] }
        let start = dueThrough.withLockedValue { $0 }
        let lag = Self.seconds(settledLag)
        let (due, through) = try await run("due") { client, logger in
            let rows = try await client.query(
                """
                WITH recent AS (
                    SELECT id, project, settled, received_at FROM rc_relay_outbox WHERE id > \(start)),
                pending AS (SELECT id, project FROM recent WHERE NOT settled AND project = ANY(\(projects)::text[])),
                through AS (
                    SELECT max(id) AS id FROM recent
                    WHERE id < coalesce((SELECT min(id) FROM pending), 9223372036854775807)
                        AND received_at < now() - make_interval(secs => \(lag)))
                SELECT (SELECT array_agg(DISTINCT project) FROM pending), (SELECT id FROM through)
                """, logger: logger)
            var due: [String] = []
            var through: Int64?
            for try await (projects, id) in rows.decode(([String]?, Int64?).self) {
                due = projects ?? []
                through = id
            }
            return (Set(due), through)
        }
        if let through { dueThrough.withLockedValue { $0 = max($0, through) } }
        return due
    }

    /// The projects among `projects` (leases just taken) with an event still pending, wherever its row lies: one
    /// statement for 10,000 projects taken at a start, through the index on each project's rows.
    package func projectsWithPendingAnywhere(_ projects: [String]) async throws(StoreError) -> Set<String> {
        guard !projects.isEmpty else { return [] }
        return try await run("due") { client, logger in
            let rows = try await client.query(
                """
                SELECT DISTINCT o.project FROM unnest(\(projects)::text[]) AS p(project)
                JOIN rc_relay_outbox o ON o.project = p.project WHERE NOT o.settled
                """, logger: logger)
            var due: Set<String> = []
            for try await project in rows.decode(String.self) { due.insert(project) }
            return due
        }
    }
}
