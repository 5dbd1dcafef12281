import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// Waves and quiet periods under way.
extension ConsoleRoutes {
    func schedules() -> [String: Any] {
        let schedules = admin.engine.schedules
        let quiet = schedules.quietPeriods
        return [
            "waves": schedules.waves.map { wave -> [String: Any] in
                [
                    "route": wave.route, "project": wave.project, "version": String(wave.version), "shards": wave.shards, "sent": wave.sent,
                    "started": Self.when(wave.startedAt), "next": wave.nextSendAt.map { Self.when($0) } ?? "",
                ]
            },
            "hasQuiet": !quiet.isEmpty,
            "quiet": quiet.map {
                ["project": $0.project, "route": $0.route, "audience": $0.audience, "version": String($0.version), "until": Self.when($0.until)]
                    as [String: Any]
            },
        ]
    }
}
