import Logging
import PostgresNIO

/// What `rc-relay doctor` learns of the database: that it answers, how far it is migrated, and its leases.
package struct StoreDiagnosis: Sendable, Equatable {
    /// The newest migration applied (nil: the relay's tables do not exist yet: `serve` creates them at start).
    package var schemaVersion: Int?
    /// The newest migration this build knows.
    package var latestKnown: Int
    /// The lease table's rows, and those held now (nil: no lease table yet).
    package var leases: Int?
    package var leasesHeld: Int?
}

extension PostgresStore {
    /// Connects, reads the schema's version and the lease table, and disconnects: nothing is written.
    package static func diagnose(_ settings: StoreSettings, logger: Logger) async throws(StoreError) -> StoreDiagnosis {
        let store: PostgresStore
        do {
            store = try PostgresStore(settings: settings, logger: logger)
        } catch {
            throw .failed("the TLS settings cannot be used: \(error)")
        }
        // The pool runs as a child task for as long as the questions take.
        let result = await withTaskGroup(of: Void.self, returning: Result<StoreDiagnosis, StoreError>.self) { group in
            group.addTask { await store.client.run() }
            defer { group.cancelAll() }
            do throws(StoreError) {
                return .success(try await questions(store))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func questions(_ store: PostgresStore) async throws(StoreError) -> StoreDiagnosis {
        try await store.run("diagnose") { client, logger in
            var diagnosis = StoreDiagnosis(latestKnown: Migrations.latest)
            let tables = try await client.query(
                "SELECT to_regclass('rc_relay_schema') IS NOT NULL, to_regclass('rc_relay_leases') IS NOT NULL", logger: logger)
            var exists = (schema: false, leases: false)
            for try await (schema, leases) in tables.decode((Bool, Bool).self) { exists = (schema, leases) }
            if exists.schema {
                for try await version in try await client.query("SELECT coalesce(max(version), 0) FROM rc_relay_schema", logger: logger)
                    .decode(Int.self)
                {
                    diagnosis.schemaVersion = version
                }
            }
            if exists.leases {
                // Schema 8 on: a lease counts while its holder's heartbeat does (the view says which); before, by its own expiry.
                var view = false
                for try await exists in try await client.query("SELECT to_regclass('rc_relay_held') IS NOT NULL", logger: logger).decode(Bool.self) {
                    view = exists
                }
                let rows = try await client.query(
                    view
                        ? "SELECT count(*)::bigint, (SELECT count(*) FROM rc_relay_held)::bigint FROM rc_relay_leases"
                        : "SELECT count(*)::bigint, (count(*) FILTER (WHERE expires_at > now()))::bigint FROM rc_relay_leases",
                    logger: logger)
                for try await (all, held) in rows.decode((Int64, Int64).self) { (diagnosis.leases, diagnosis.leasesHeld) = (Int(all), Int(held)) }
            }
            return diagnosis
        }
    }
}
