import Synchronization

/// The newest template version each route has a ping for, so an older ping still waiting to retry can stand down:
/// pings are idempotent "your config is stale" signals, and the newer one carries the newer version.
final class LatestVersions: Sendable {
    private let latest = Mutex<[String: Int64]>([:])

    /// Records that `version` is being sent on the route (the newest seen is kept).
    func record(project: String, route: String, version: Int64) {
        let key = "\(project)/\(route)"
        latest.withLock { $0[key] = max($0[key] ?? version, version) }
    }

    /// Whether a newer version than `version` has been claimed on the route since.
    func isSuperseded(project: String, route: String, version: Int64) -> Bool {
        let key = "\(project)/\(route)"
        return latest.withLock { ($0[key] ?? version) > version }
    }
}
