import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// The overview page: readiness, the projects, the last 24 hours as a chart, the waves under way, the last ten
/// publishes with their pings.
extension ConsoleRoutes {
    func overview() async -> [String: Any] {
        let checks = await probes.readiness()
        var publishes: [(key: String, value: [String: Any], pings: [[String: Any]])] = []
        // The store away: the overview still shows readiness, which says so.
        // The chart counts what the history keeps (`delivery.historySize`), at most the newest 5,000 pings.
        let kept = (try? await admin.history(.init(limit: 5_000))) ?? []
        let recent = kept.prefix(300)
        for entry in recent where !entry.toDevice && entry.origin != .send {
            let key = "\(entry.project)/\(entry.version.versionNumber)"
            let ping: [String: Any] = ["id": entry.id, "route": entry.route, "status": Self.status(entry), "waiting": entry.waitingFor ?? ""]
            if let index = publishes.firstIndex(where: { $0.key == key }) {
                publishes[index].pings.append(ping)
            } else if publishes.count < 10 {
                publishes.append(
                    (key, ["version": String(entry.version.versionNumber), "project": entry.project, "when": Self.when(entry.receivedAt)], [ping]))
            }
        }
        return [
            "checks": checks.map { ["name": $0.name, "ok": $0.ok, "detail": $0.detail] as [String: Any] },
            "projects": configuration.current.projects.ids,
            "publishes": publishes.map { publish in publish.value.merging(["pings": publish.pings.reversed() as [[String: Any]]]) { $1 } },
            "activity": ConsoleActivityChart(entries: kept).svg(),
            "waves": schedules()["waves"] ?? [],
        ]
    }
}
