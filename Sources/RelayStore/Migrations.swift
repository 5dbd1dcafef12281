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
            version: 1, description: "events, their keys, leases",
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
                """
                CREATE TABLE rc_relay_leases (
                    name text PRIMARY KEY,
                    holder text NOT NULL,
                    expires_at timestamptz NOT NULL
                )
                """,
            ])
    ]

    static var latest: Int { steps.map(\.version).max() ?? 0 }
}
