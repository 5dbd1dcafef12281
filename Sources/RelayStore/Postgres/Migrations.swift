/// The relay's tables, as numbered steps. A step, once released, never changes: a new one is added instead.
///
/// Every table is named `rc_relay_*`, so the relay can share a database with other applications. Records and reports
/// are JSON kept as text: only the relay reads them, and `jsonb` would refuse a `\u0000` an FCM error message may carry.
enum Migrations {
    struct Step: Sendable {
        var version: Int
        var description: String
        var statements: [String]
    }

    static let steps: [Step] = [
        Step(
            version: 1, description: "events, their keys, admission, leases",
            statements: [
                """
                CREATE TABLE rc_relay_events (
                    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    project text NOT NULL,
                    version bigint NOT NULL,
                    fingerprint text NOT NULL,
                    record text NOT NULL,
                    settled boolean NOT NULL DEFAULT false,
                    reports text,
                    received_at timestamptz NOT NULL DEFAULT now(),
                    settled_at timestamptz
                )
                """,
                "CREATE INDEX rc_relay_events_pending ON rc_relay_events (project, id) WHERE NOT settled",
                "CREATE INDEX rc_relay_events_settled ON rc_relay_events (settled_at) WHERE settled",
                """
                CREATE TABLE rc_relay_event_keys (
                    key text PRIMARY KEY,
                    event bigint NOT NULL REFERENCES rc_relay_events (id) ON DELETE CASCADE
                )
                """,
                "CREATE INDEX rc_relay_event_keys_event ON rc_relay_event_keys (event)",
                // Admission in one round trip (it was six statements: 0.30 of the in-memory throughput, docs/performance.md):
                // forget the event's expired settled holders, insert it with its keys, and if a key is taken, undo and
                // say which event holds it. One statement is one transaction: concurrent admissions of a key wait on its
                // unique index, so exactly one commits.
                """
                CREATE FUNCTION rc_relay_admit(
                    p_project text, p_version bigint, p_fingerprint text, p_record text, p_keys text[], p_window double precision,
                    p_notice text)
                RETURNS TABLE (holder_key text, holder_fingerprint text, holder_settled boolean, holder_reports text)
                LANGUAGE plpgsql AS $$
                DECLARE
                    new_id bigint;
                    inserted integer;
                BEGIN
                    DELETE FROM rc_relay_events e USING rc_relay_event_keys k
                    WHERE k.event = e.id AND k.key = ANY(p_keys) AND e.settled
                        AND e.settled_at < now() - make_interval(secs => p_window);
                    INSERT INTO rc_relay_events (project, version, fingerprint, record)
                    VALUES (p_project, p_version, p_fingerprint, p_record) RETURNING id INTO new_id;
                    WITH added AS (
                        INSERT INTO rc_relay_event_keys (key, event) SELECT DISTINCT unnest(p_keys), new_id
                        ON CONFLICT DO NOTHING RETURNING 1)
                    SELECT count(*) INTO inserted FROM added;
                    IF inserted = (SELECT count(DISTINCT k) FROM unnest(p_keys) AS k) THEN
                        IF p_notice IS NOT NULL THEN
                            PERFORM pg_notify('rc_relay_events', p_notice);
                        END IF;
                        RETURN;
                    END IF;
                    DELETE FROM rc_relay_events WHERE id = new_id;
                    RETURN QUERY
                        SELECT k.key, e.fingerprint, e.settled, coalesce(e.reports, '[]') FROM rc_relay_event_keys k
                        JOIN rc_relay_events e ON e.id = k.event WHERE k.key = ANY(p_keys);
                END
                $$
                """,
                """
                CREATE TABLE rc_relay_leases (
                    name text PRIMARY KEY,
                    holder text NOT NULL,
                    expires_at timestamptz NOT NULL
                )
                """,
            ]),
        Step(
            version: 2, description: "the delivery history every replica writes",
            statements: [
                """
                CREATE TABLE rc_relay_pings (
                    id text PRIMARY KEY,
                    seq bigint GENERATED ALWAYS AS IDENTITY,
                    project text NOT NULL,
                    route text NOT NULL,
                    version bigint NOT NULL,
                    status text NOT NULL,
                    entry text NOT NULL,
                    updated_at timestamptz NOT NULL DEFAULT now()
                )
                """,
                "CREATE UNIQUE INDEX rc_relay_pings_seq ON rc_relay_pings (seq)",
            ]),
        Step(
            version: 3, description: "admission of several events in one round trip",
            statements: [
                // The admissions a replica has waiting go in one call and one commit (AdmissionBatcher): each is
                // `rc_relay_admit` on its slice of the keys, and its rows, if any, say which item they answer.
                """
                CREATE FUNCTION rc_relay_admit_all(
                    p_projects text[], p_versions bigint[], p_fingerprints text[], p_records text[], p_keys text[],
                    p_key_counts integer[], p_windows double precision[], p_notices text[])
                RETURNS TABLE (item integer, holder_key text, holder_fingerprint text, holder_settled boolean, holder_reports text)
                LANGUAGE plpgsql AS $$
                DECLARE
                    key_start integer := 1;
                    item_keys text[];
                BEGIN
                    FOR i IN 1 .. coalesce(array_length(p_projects, 1), 0) LOOP
                        item_keys := coalesce(p_keys[key_start : key_start + p_key_counts[i] - 1], '{}');
                        key_start := key_start + p_key_counts[i];
                        RETURN QUERY SELECT i, a.holder_key, a.holder_fingerprint, a.holder_settled, a.holder_reports
                            FROM rc_relay_admit(p_projects[i], p_versions[i], p_fingerprints[i], p_records[i], item_keys,
                                p_windows[i], nullif(p_notices[i], '')) AS a;
                    END LOOP;
                END
                $$
                """
            ]),
        Step(
            version: 4, description: "admission functions on generic plans",
            statements: [
                // PL/pgSQL plans the statements of `rc_relay_admit` again for each event while it prefers custom
                // plans, and planning an event's `settled_at <` comparison probes the end of an index where settling
                // and pruning leave dead entries: an admission went from 0.08 to 0.29 ms of PostgreSQL's time per
                // event in four 8-second loads. The generic plans (index scans on the keys) are the custom ones
                // without the planning: it stays at 0.08 ms (docs/performance.md).
                """
                ALTER FUNCTION rc_relay_admit(text, bigint, text, text, text[], double precision, text)
                    SET plan_cache_mode = force_generic_plan
                """,
                """
                ALTER FUNCTION rc_relay_admit_all(text[], bigint[], text[], text[], text[], integer[], double precision[], text[])
                    SET plan_cache_mode = force_generic_plan
                """,
            ]),
        Step(
            version: 5, description: "an event's keys go with it by a trigger; admission looks for expired holders only on a conflict",
            statements: [
                // The foreign key from a key to its event cost a lookup and a row lock on the event for each key an
                // admission inserts (the keys were about a third of an admission's time in PostgreSQL). Keys are only
                // ever inserted for the event the same statement inserts, so the check never failed; what the key
                // needs is to go with its event, which the trigger does (for pruning, an expired holder, an undone
                // admission, and an older replica's own deletes during a rolling deploy).
                //
                // Both tables before the first change, events first as every statement of the relay takes them: the
                // statements of older replicas still running finish first, and the next ones wait for the step.
                "LOCK TABLE rc_relay_events, rc_relay_event_keys IN ACCESS EXCLUSIVE MODE",
                """
                CREATE FUNCTION rc_relay_forget_keys() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    DELETE FROM rc_relay_event_keys WHERE event = OLD.id;
                    RETURN NULL;
                END
                $$
                """,
                "CREATE TRIGGER rc_relay_events_forget_keys AFTER DELETE ON rc_relay_events FOR EACH ROW EXECUTE FUNCTION rc_relay_forget_keys()",
                "ALTER TABLE rc_relay_event_keys DROP CONSTRAINT IF EXISTS rc_relay_event_keys_event_fkey",
                // The same answers as step 1's admission, with the search for expired settled holders (a statement
                // per event) only when a key is taken: a new event, the usual case, is two statements. Replicas of
                // an older rc-relay call it too, through `rc_relay_admit_all`.
                """
                CREATE OR REPLACE FUNCTION rc_relay_admit(
                    p_project text, p_version bigint, p_fingerprint text, p_record text, p_keys text[], p_window double precision,
                    p_notice text)
                RETURNS TABLE (holder_key text, holder_fingerprint text, holder_settled boolean, holder_reports text)
                LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
                DECLARE
                    new_id bigint;
                    wanted integer := (SELECT count(DISTINCT k) FROM unnest(p_keys) AS k);
                    inserted integer;
                BEGIN
                    INSERT INTO rc_relay_events (project, version, fingerprint, record)
                    VALUES (p_project, p_version, p_fingerprint, p_record) RETURNING id INTO new_id;
                    WITH added AS (
                        INSERT INTO rc_relay_event_keys (key, event) SELECT DISTINCT unnest(p_keys), new_id
                        ON CONFLICT DO NOTHING RETURNING 1)
                    SELECT count(*) INTO inserted FROM added;
                    IF inserted < wanted THEN
                        -- A key is taken. A settled holder past the window is forgotten (its keys go with it), and the
                        -- keys it held are taken again.
                        DELETE FROM rc_relay_events e USING rc_relay_event_keys k
                        WHERE k.event = e.id AND k.key = ANY(p_keys) AND e.settled
                            AND e.settled_at < now() - make_interval(secs => p_window);
                        IF FOUND THEN
                            WITH added AS (
                                INSERT INTO rc_relay_event_keys (key, event) SELECT DISTINCT unnest(p_keys), new_id
                                ON CONFLICT DO NOTHING RETURNING 1)
                            SELECT inserted + count(*) INTO inserted FROM added;
                        END IF;
                    END IF;
                    IF inserted = wanted THEN
                        IF p_notice IS NOT NULL THEN
                            PERFORM pg_notify('rc_relay_events', p_notice);
                        END IF;
                        RETURN;
                    END IF;
                    DELETE FROM rc_relay_events WHERE id = new_id;
                    RETURN QUERY
                        SELECT k.key, e.fingerprint, e.settled, coalesce(e.reports, '[]') FROM rc_relay_event_keys k
                        JOIN rc_relay_events e ON e.id = k.event WHERE k.key = ANY(p_keys);
                END
                $$
                """,
            ]),
        Step(
            version: 6, description: "lease epochs (fencing) and the newest version relayed per project",
            statements: [
                // Every take-over of a lease increases its epoch, whoever takes it (an older replica's statement too,
                // hence a trigger): a holder that was paused while another took over finds its epoch gone, and the
                // store refuses the work it decided under it (docs/replicas.md, fencing).
                "ALTER TABLE rc_relay_leases ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT 1",
                """
                CREATE FUNCTION rc_relay_lease_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF NEW.holder IS DISTINCT FROM OLD.holder THEN
                        NEW.epoch := OLD.epoch + 1;
                    END IF;
                    RETURN NEW;
                END
                $$
                """,
                "CREATE TRIGGER rc_relay_leases_epoch BEFORE UPDATE ON rc_relay_leases FOR EACH ROW EXECUTE FUNCTION rc_relay_lease_epoch()",
                // The newest version relayed per project, shared: a replica that takes a project's lease polls from
                // it instead of adopting what Remote Config has now (which would skip a version published during the
                // hand-over). It advances with every settled delivery, whoever delivered it.
                """
                CREATE TABLE rc_relay_marks (
                    project text PRIMARY KEY,
                    relayed bigint NOT NULL,
                    updated_at timestamptz NOT NULL DEFAULT now()
                )
                """,
            ]),
        oneRowPerEvent,
        heartbeats,
        pingsInTheirEvent,
        roomToSettle,
        leanerRows,
        plannedOnce,
    ]

    static var latest: Int { steps.map(\.version).max() ?? 0 }
}
