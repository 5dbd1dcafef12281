extension Migrations {
    /// Step 12 (issue #50): the common settlement, planned once per connection.
    static let plannedOnce = Step(
        version: 12, description: "the settlement of a batch as a function whose plan each connection keeps",
        statements: [
            // Issue #50: PostgreSQL parsed and planned the settlement's statement at every batch, and planning cost as
            // much as running it (docs/performance.md, 2026-12-07). A PL/pgSQL function keeps the plan of its statement
            // for the connection's life (`force_generic_plan`): one call a batch, one set-wide statement in it. (The
            // admission, tried the same way, cost PostgreSQL more than it saved: its plan is cheap, and the function's
            // call and `RETURN QUERY` are not.) A kept plan is made from the table as it was then: on a
            // new, nearly empty outbox the prepared settlement's plan scanned the whole table at every batch once it
            // grew (2026-12-05), so the only plan this function may make is the one right at any size: for each event
            // its row by the primary key, and each project's row of marks by its own (no sequential scan, hash or merge
            // join). The batches that need more (a project's first row of marks, history copies written apart, a
            // record without its row) keep the statement built for them. Only adds a function: replicas of schema 11
            // still running are unaffected.
            """
            CREATE FUNCTION rc_relay_settle(ids bigint[], new_reports text[], advance boolean[], new_pings text[])
            RETURNS SETOF integer LANGUAGE plpgsql
            SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
            AS $$
            BEGIN
                RETURN QUERY
                WITH v AS (
                    SELECT * FROM unnest(ids, new_reports, advance, new_pings) WITH ORDINALITY AS v(id, reports, marks, pings, item)),
                settled AS (
                    UPDATE rc_relay_outbox o
                    SET settled = true, settled_at = now(), reports = v.reports, record = NULL, pings = nullif(v.pings, '')
                    FROM v WHERE o.id = v.id AND NOT o.settled
                    RETURNING o.project, o.version, v.marks, v.item),
                newest AS (SELECT s.project, max(s.version) AS version FROM settled s WHERE s.marks GROUP BY s.project),
                -- An update where the version is newer (an upsert would lock, and log the lock of, every row it finds).
                marked AS (
                    UPDATE rc_relay_marks m SET relayed = n.version, updated_at = now() FROM newest n
                    WHERE m.project = n.project AND (m.relayed IS NULL OR m.relayed < n.version))
                SELECT s.item::integer FROM settled s;
            END
            $$
            """
        ])
}
