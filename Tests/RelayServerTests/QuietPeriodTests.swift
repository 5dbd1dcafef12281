import DeliveryEngine
import Foundation
import Testing

@testable import RelayServer

/// A quiet period end to end: real webhooks into a live relay, FCM's recorded messages decide, time on the engine's
/// clock (nothing sleeps).
@Test func aBurstOfPublishesIsAnswered202AtOnceAndMakesOnePingWithTheNewestVersion() async throws {
    let clock = ManualDeliveryClock()
    try await withSpool { spool in
        try await withLiveRelay(
            .standard.routes(
                """
                  - {name: stale, topic: PUSH_RC, debounceSeconds: 30, data: {CONFIG_STATE: STALE, V: "{{version}}"}}
                """
            ).environment(["RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "5", "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool]).clock(clock)
        ) { relay in
            for version in 1...10 {
                if version > 1 { clock.advance(by: .seconds(6)) }
                let answer = try await relay.post(#"{"versionNumber":\#(version)}"#)
                #expect(answer.status == 202, "version \(version): \(answer.text)")
                await clock.waitForPending { $0.contains(.seconds(30)) }  // its quiet period has begun
                let quiet = try await relay.admin(.GET, "/admin/schedules").decode(Components.Schemas.Schedules.self).quietPeriods
                #expect(quiet.map(\.versionNumber) == ["\(version)"] && quiet.map(\.audience) == ["topic:PUSH_RC"])
            }
            #expect(spooledFiles(spool).count >= 1, "acknowledged events are on disk while their ping waits")
            #expect(await relay.emulator.messages.isEmpty)
            let waiting = try await relay.admin(.GET, "/admin/deliveries?version=10").deliveries
            #expect(waiting.map(\.waitingFor) == ["quiet period"] && waiting.first?.waitingUntil != nil)
            clock.advance(by: .seconds(30))
            try await eventually("the newest version's ping") { await relay.emulator.messages.count == 1 }
            try await eventually("every acknowledged event leaves the spool") { spooledFiles(spool).isEmpty }
            let sent = await relay.emulator.messages.map(\.message)
            #expect(sent.count == 1 && sent[0].contains(#""V":"10""#), "\(sent)")
            let statuses = try await relay.admin(.GET, "/admin/deliveries").deliveries.map { ($0.versionNumber, $0.status) }
            #expect(statuses.filter { $0.1 == .superseded }.count == 9 && statuses.filter { $0.1 == .accepted }.map(\.0) == ["10"])
            let metrics = try await relay.admin(.GET, "/metrics").text
            #expect(metrics.contains(#"rc_relay_quiet_periods_total{project="demo-project",route="stale",outcome="replaced"} 9"#), "\(metrics.split(separator: "\n").filter { $0.contains("quiet") })")
        }
    }
}
