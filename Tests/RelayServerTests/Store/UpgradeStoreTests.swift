import Foundation
import RelayCore
import Testing

@testable import DeliveryEngine
@testable import RelayServer
@testable import RelayStore

extension PostgresCluster {
    /// The schema as the rc-relay of step `last` left it: each step in a transaction of its own, as the relay applies
    /// them, and recorded in `rc_relay_schema`.
    func migrate(through last: Int) async throws {
        _ = try await sql("CREATE TABLE rc_relay_schema (version integer PRIMARY KEY, description text NOT NULL)")
        for step in Migrations.steps where step.version <= last {
            _ = try await sql(step.statements.joined(separator: ";\n"))
            _ = try await sql("INSERT INTO rc_relay_schema (version, description) VALUES (\(step.version), 'before')")
        }
    }
}

/// Issue #50: a database of the store before step 7 (one row per event), holding events still pending, upgraded by
/// a real relay that starts on it; its pending events are delivered afterwards (docs/replicas.md, Schema).
@Suite(.serialized) struct UpgradeStoreTests {
    @Test func aRelayStartedOnASchemaSixDatabaseDeliversTheEventsItHeldPending() async throws {
        try await withPostgres { cluster in
            try await cluster.migrate(through: 6)
            // Admitted as schema 6's rc-relay admitted them, and never delivered: version 41 with nothing done yet,
            // version 42 with one of its two routes done already (its progress must survive: that route is not sent
            // again). 42 is sent first (newest first), and 41 stands down behind it on both routes.
            let fresh = EventRecord(
                keys: ["demo-project/version/41", "demo-project/id/evt-41"], project: "demo-project", eventID: "evt-41",
                format: "cloudevent", version: TemplateVersion(versionNumber: 41), receivedAt: Date())
            var halfway = EventRecord(
                keys: ["demo-project/version/42", "demo-project/id/evt-42"], project: "demo-project", eventID: "evt-42",
                format: "cloudevent", version: TemplateVersion(versionNumber: 42), receivedAt: Date())
            halfway.done = ["default"]
            for event in [fresh, halfway] {
                let keys = event.keys.map { "'\($0)'" }.joined(separator: ",")
                _ = try await cluster.sql(
                    """
                    SELECT count(*) FROM rc_relay_admit('demo-project', \(event.version.versionNumber), '\(event.fingerprint)',
                        '\(event.jsonText)', ARRAY[\(keys)], 600, NULL)
                    """)
            }
            #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_events WHERE NOT settled") == "2")
            let store = "store: {postgres: {url: \"\(cluster.url)\", leaseSeconds: 3}}"
            let routes = """
                  - name: default
                    topic: PUSH_RC
                    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
                  - name: second
                    topic: RC_SECOND
                    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
                """
            try await withLiveRelay(.standard.routes(routes).extraYAML { _ in store }) { relay in
                // Migrated to step 9 at start, then delivered by the replica that took the project's lease.
                try await eventually("the relay settled the upgraded database's pending events") {
                    (try? await cluster.sql("SELECT count(*) FROM rc_relay_outbox WHERE settled")) == "2"
                }
                let sent = await relay.recordedMessages().map {
                    "\($0["topic"] ?? "?") \(($0["data"] as? [String: String])?["CONFIG_VERSION"] ?? "?")"
                }
                #expect(sent == ["RC_SECOND 42"])
                #expect(try await cluster.sql("SELECT max(version) FROM rc_relay_schema") == "12")
                #expect(try await cluster.sql("SELECT count(*) FROM pg_class WHERE relname = 'rc_relay_events'") == "0")
                // The settled events still answer their redeliveries, on the upgraded store.
                let again = try await relay.post(#"{"versionNumber": "41"}"#, headers: binaryHeaders(id: "evt-41"))
                #expect(again.status == 200)
                #expect(again.json["duplicate"] as? Bool == true)
            }
        }
    }
}
