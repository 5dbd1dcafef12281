extension Migrations {
    /// Step 7 (issue #50): one row per event.
    static let oneRowPerEvent = Step(
        version: 7, description: "one row per event: its keys hashed in columns of its own, a settlement that is a HOT update",
        statements: [
            // Issue #50: an event was a row, a row per key, a trigger and PL/pgSQL per event; a settlement changed
            // `settled`, which index predicates read, so it was never a HOT update. Now an event is one row of
            // `rc_relay_outbox`: its keys are 16-byte hashes in three uniquely indexed columns (a key's kind decides
            // its column: the project and version, an event id, a `webhook-id`), their text is kept in `keys` for
            // whoever reads the table, and no index reads a column a settlement or a progress write changes.
            //
            // Older replicas still running call functions this step drops: their admissions fail (503, and the
            // sender retries, reaching a replica of this version). Their statements finish before the step (the
            // lock), and the pending events they admitted are copied, keys and all.
            "LOCK TABLE rc_relay_events, rc_relay_event_keys IN ACCESS EXCLUSIVE MODE",
            // A key's fixed-width identity: the first 16 bytes of its SHA-256. SQL, not PL/pgSQL: it is inlined.
            """
            CREATE FUNCTION rc_relay_key(k text) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS $$ SELECT encode(substr(sha256(convert_to(k, 'UTF8')), 1, 16), 'hex')::uuid $$
            """,
            // Room on each page for a settlement's new row version (fillfactor), so it stays on its page (HOT).
            """
            CREATE TABLE rc_relay_outbox (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                project text NOT NULL,
                version bigint NOT NULL,
                key_version uuid NOT NULL,
                key_id uuid,
                key_webhook uuid,
                keys text NOT NULL,
                record text,
                window_seconds double precision NOT NULL,
                received_at timestamptz NOT NULL DEFAULT now(),
                settled boolean NOT NULL DEFAULT false,
                settled_at timestamptz,
                reports text
            ) WITH (fillfactor = 85)
            """,
            // Every event of schema 6, pending or settled (a settled one still answers its duplicates), in order.
            """
            INSERT INTO rc_relay_outbox (project, version, key_version, key_id, key_webhook, keys, record, window_seconds, received_at,
                settled, settled_at, reports)
            SELECT e.project, e.version, rc_relay_key(e.project || '/version/' || e.version),
                (SELECT rc_relay_key(min(k.key)) FROM rc_relay_event_keys k
                    WHERE k.event = e.id AND left(k.key, length(e.project) + 4) = e.project || '/id/'),
                (SELECT rc_relay_key(min(k.key)) FROM rc_relay_event_keys k WHERE k.event = e.id AND left(k.key, 8) = 'webhook/'),
                coalesce((SELECT json_agg(k.key ORDER BY k.key <> e.project || '/version/' || e.version, k.key)::text
                    FROM rc_relay_event_keys k WHERE k.event = e.id), '[]'),
                CASE WHEN e.settled THEN NULL ELSE e.record END, 600, e.received_at, e.settled, e.settled_at, e.reports
            FROM rc_relay_events e ORDER BY e.id
            """,
            "DROP FUNCTION rc_relay_admit_all(text[], bigint[], text[], text[], text[], integer[], double precision[], text[])",
            "DROP FUNCTION rc_relay_admit(text, bigint, text, text, text[], double precision, text)",
            "DROP TABLE rc_relay_event_keys",
            "DROP TABLE rc_relay_events",
            "DROP FUNCTION rc_relay_forget_keys()",
            "CREATE UNIQUE INDEX rc_relay_outbox_key_version ON rc_relay_outbox (key_version)",
            // An event without an id or a `webhook-id` (a poll's, a bare version's) adds no entry to their indexes.
            "CREATE UNIQUE INDEX rc_relay_outbox_key_id ON rc_relay_outbox (key_id) WHERE key_id IS NOT NULL",
            "CREATE UNIQUE INDEX rc_relay_outbox_key_webhook ON rc_relay_outbox (key_webhook) WHERE key_webhook IS NOT NULL",
            // A project's events in order, settled or not: the pending ones are found through it (a predicate on
            // `settled` would make every settlement a new index entry in every index).
            "CREATE INDEX rc_relay_outbox_project ON rc_relay_outbox (project, id)",
            // An operator's reset of a project's marks is durable: a generation every replica compares with the one it
            // applied last (at each renewal), not only a `NOTIFY` a replica whose listener is reconnecting misses. A
            // reset project has no newest version relayed until the next one.
            "ALTER TABLE rc_relay_marks ALTER COLUMN relayed DROP NOT NULL",
            "ALTER TABLE rc_relay_marks ADD COLUMN generation bigint NOT NULL DEFAULT 0",
            // When it was last reset: a take-over reads what FCM accepted since then only.
            "ALTER TABLE rc_relay_marks ADD COLUMN reset_at timestamptz",
        ])
}
