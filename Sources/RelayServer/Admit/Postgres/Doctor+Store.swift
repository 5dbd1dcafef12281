import Logging
import RelayStore

extension Doctor {
    /// The shared store: reachable, its schema's version against this build's, and its leases.
    static func storeCheck(_ store: StoreSettings, logger: Logger) async -> DoctorCheck {
        let name = "store"
        do {
            let found = try await PostgresStore.diagnose(store, logger: logger)
            let leases = found.leases.map { "; \($0) lease(s), \(found.leasesHeld ?? 0) held now" } ?? "; no lease table yet"
            let at = "\(store.redacted) answers"
            guard let version = found.schemaVersion else {
                return DoctorCheck(
                    check: name, result: .warn, detail: "\(at); it has no rc-relay tables yet",
                    fix: "nothing: serve creates them at start (the role needs CREATE on the database's schema)")
            }
            if version > found.latestKnown {
                return DoctorCheck(
                    check: name, result: .fail, detail: "\(at); its schema is version \(version), newer than this build's \(found.latestKnown)",
                    fix: "run the newer rc-relay that migrated it")
            }
            if version < found.latestKnown {
                return DoctorCheck(
                    check: name, result: .warn, detail: "\(at); schema version \(version) of \(found.latestKnown)\(leases)",
                    fix: "nothing: serve applies migrations \(version + 1) to \(found.latestKnown) at start")
            }
            return DoctorCheck(check: name, result: .ok, detail: "\(at); schema version \(version) (the latest)\(leases)")
        } catch {
            return DoctorCheck(
                check: name, result: .fail, detail: "\(store.redacted): \(error)",
                fix: "check store.postgres (host, port, database, password, sslmode) and that the relay's host may reach it")
        }
    }
}
