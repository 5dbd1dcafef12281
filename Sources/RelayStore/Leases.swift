import Foundation
import PostgresNIO

/// Leases: a named claim one replica holds until it expires, renewed while the replica lives. Times are the
/// database's (`now()`), so replicas whose clocks disagree still agree on who holds what.
extension PostgresStore {
    /// Takes the lease if it is free or expired, or renews it if this replica holds it; false when another does.
    package func acquire(_ name: String, for duration: Duration) async throws(StoreError) -> Bool {
        let seconds = Self.seconds(duration)
        let holder = holder
        return try await run("acquire") { client, logger in
            let rows = try await client.query(
                """
                INSERT INTO rc_relay_leases (name, holder, expires_at) VALUES (\(name), \(holder), now() + make_interval(secs => \(seconds)))
                ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                WHERE rc_relay_leases.holder = EXCLUDED.holder OR rc_relay_leases.expires_at < now()
                RETURNING holder
                """, logger: logger)
            var held = false
            for try await _ in rows.decode(String.self) { held = true }
            return held
        }
    }

    /// Gives the lease up (on a graceful stop), so another replica takes over at once.
    package func release(_ name: String) async throws(StoreError) {
        let holder = holder
        try await run("release") { client, logger in
            try await client.query("DELETE FROM rc_relay_leases WHERE name = \(name) AND holder = \(holder)", logger: logger)
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
}
