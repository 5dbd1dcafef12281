extension Migrations {
    /// Step 8 (issue #52): a replica renews one row, not one per project.
    static let heartbeats = Step(
        version: 8, description: "leases held by a replica's heartbeat: an idle renewal writes one row whatever the number of projects",
        statements: [
            // Issue #52: every `leaseSeconds / 4` each replica rewrote the expiry of every lease it held: 10,000
            // projects were some 2,700 row updates a second. Now a replica has one row here, its heartbeat, and a lease
            // it holds says `expires_at = 'infinity'`: it counts while its holder's heartbeat does. A replica whose
            // heartbeat expired is deleted by the next replica that takes leases (under `leaseLock`, in the transaction
            // that takes them), so its own renewal, an `UPDATE` of that row, finds nothing and it knows it lost its
            // leases; while its row is there, nobody has taken any of them. A lease with a finite expiry is an older
            // replica's (schema 7, renewed row by row) until it passes; `'-infinity'` is free.
            """
            CREATE TABLE rc_relay_replicas (
                holder text PRIMARY KEY,
                expires_at timestamptz NOT NULL,
                started_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // Raised whenever leases are freed (a graceful stop, a replica found dead, a project no longer configured):
            // an idle replica reads it in its renewal's statement and takes leases only when it moved.
            "CREATE SEQUENCE rc_relay_lease_frees",
            // The few leases not held by a heartbeat: free ones, and an older replica's.
            "CREATE INDEX rc_relay_leases_not_heartbeat ON rc_relay_leases (name) WHERE expires_at <> 'infinity'",
            // Who holds what now, with the time each lease counts until: what fencing, a poll's admission, pruning and
            // operators read.
            """
            CREATE VIEW rc_relay_held AS
            SELECT l.name, l.holder, l.epoch, CASE WHEN l.expires_at = 'infinity' THEN r.expires_at ELSE l.expires_at END AS expires_at
            FROM rc_relay_leases l LEFT JOIN rc_relay_replicas r ON r.holder = l.holder AND l.expires_at = 'infinity'
            WHERE (l.expires_at = 'infinity' AND r.expires_at > now()) OR (l.expires_at < 'infinity' AND l.expires_at > now())
            """,
        ])
}
