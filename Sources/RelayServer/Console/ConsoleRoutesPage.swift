import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// Each project's routes, as configured.
extension ConsoleRoutes {
    func routes() -> [String: Any] {
        let current = configuration.current
        return [
            "projects": current.projects.ids.compactMap { id -> [String: Any]? in
                guard let pipeline = current.projects[id] else { return nil }
                return [
                    "id": id,
                    "routes": pipeline.routes.routes.map { route -> [String: Any] in
                        var when: [String] = []
                        if let types = route.updateTypes { when.append("update types: " + types.sorted().joined(separator: ", ")) }
                        if let origins = route.origins { when.append("origins: " + origins.sorted().joined(separator: ", ")) }
                        if let changed = route.definition.when?.changed {
                            when.append("changes to: " + ((changed.parameters ?? []) + (changed.conditions ?? [])).joined(separator: ", "))
                        }
                        var schedule: [String] = []
                        if route.quiet > .zero { schedule.append("quiet period \(route.quiet.components.seconds) s") }
                        if let waves = route.waves { schedule.append("\(waves.shards) shards over \(waves.spreadSeconds) s (\(waves.topicPattern))") }
                        return [
                            "chart": route.waves.map { "/console/chart?shards=\($0.shards)&spread=\($0.spreadSeconds)" } ?? "",
                            "name": route.name,
                            "target": route.destination?.summary ?? route.waves.map {
                                "topics \($0.topicPattern)"
                            }
                                ?? route.target.key,
                            "when": when.isEmpty ? "every version" : when.joined(separator: "; "),
                            "data": route.data.map { "\($0.key)=\($0.value)" }.joined(separator: " "),
                            "schedule": schedule.isEmpty ? "at once" : schedule.joined(separator: "; "),
                        ]
                    },
                ]
            }
        ]
    }
}
