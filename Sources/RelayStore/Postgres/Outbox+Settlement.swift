import PostgresNIO

/// The statement that settles a batch (``PostgresStore/settle(_:paced:)`` runs it).
extension PostgresStore {
    /// The settlement of a batch. The project's newest version relayed advances with it where `marks` says so, whoever
    /// delivered it (an outlier moves nothing; a version ``MarksPace`` holds is written soon after). A common batch calls step 12's `rc_relay_settle`, whose plan the connection keeps; one
    /// that needs more is a statement with only the parts it needs, which PostgreSQL plans at every batch (the parts
    /// most batches do not need took about half of that, docs/performance.md, 2026-12-05, night): a project's row of
    /// marks is added when this replica has not seen it yet (`unmarked`); a record without its row (none should be) is
    /// found by its version key; history copies written apart before (`written`) are deleted.
    static func settlement(
        ids: [Int64], keys: [String], reports: [String], marks: [Bool], pings: [String], written: [String], unmarked: Set<String>
    ) -> PostgresQuery {
        // The common batch: every record with its row, every project's row of marks seen, no copy written apart.
        if !ids.contains(0), unmarked.isEmpty, written.allSatisfy(\.isEmpty) {
            return "SELECT rc_relay_settle(\(ids)::bigint[], \(reports)::text[], \(marks)::boolean[], \(pings)::text[])"
        }
        // The optional parts are the statement's own text, never a value.
        let id =
            ids.contains(0) ? "coalesce(nullif(v.id, 0), (SELECT id FROM rc_relay_outbox WHERE key_version = rc_relay_key(v.key)))" : "v.id"
        // A project without a row of marks: an upsert, in case another replica adds it.
        let added =
            unmarked.isEmpty
            ? ""
            : """
            , added AS (
                INSERT INTO rc_relay_marks (project, relayed)
                SELECT project, version FROM newest n WHERE NOT EXISTS (SELECT 1 FROM rc_relay_marks m WHERE m.project = n.project)
                ON CONFLICT (project) DO UPDATE SET relayed = EXCLUDED.relayed, updated_at = now()
                WHERE rc_relay_marks.relayed IS NULL OR rc_relay_marks.relayed < EXCLUDED.relayed)
            """
        let moved =
            written.allSatisfy(\.isEmpty)
            ? ""
            : """
            , moved AS (
                DELETE FROM rc_relay_pings WHERE id IN (SELECT unnest(string_to_array(written, ' ')) FROM settled WHERE written <> ''))
            """
        return """
            WITH v AS (
                SELECT \(unescaped: id) AS id, v.reports, v.marks, nullif(v.pings, '') AS pings, v.written, v.item
                FROM unnest(\(ids)::bigint[], \(keys)::text[], \(reports)::text[], \(marks)::boolean[],
                    \(pings)::text[], \(written)::text[]) WITH ORDINALITY AS v(id, key, reports, marks, pings, written, item)),
            settled AS (
                UPDATE rc_relay_outbox o SET settled = true, settled_at = now(), reports = v.reports, record = NULL, pings = v.pings
                FROM v WHERE o.id = v.id AND NOT o.settled
                RETURNING o.project, o.version, v.marks, v.written, v.item),
            newest AS (SELECT project, max(version) AS version FROM settled WHERE marks GROUP BY project),
            -- A project with a row of marks: an update where the version is newer (an upsert would lock, and log the
            -- lock of, every row it finds, newer or not).
            marked AS (
                UPDATE rc_relay_marks m SET relayed = n.version, updated_at = now() FROM newest n
                WHERE m.project = n.project AND (m.relayed IS NULL OR m.relayed < n.version))\(unescaped: added)\(unescaped: moved)
            SELECT item::integer FROM settled
            """
    }
}
