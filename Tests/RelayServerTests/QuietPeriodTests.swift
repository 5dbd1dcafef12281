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
            #expect(
                metrics.contains(#"rc_relay_quiet_periods_total{project="demo-project",route="stale",outcome="replaced"} 9"#),
                "\(metrics.split(separator: "\n").filter { $0.contains("quiet") })")
        }
    }
}

/// An operator's send and retry of a waved route: a send reaches every shard at once; a retry of a shard's failed ping
/// goes to that shard's topic; neither touches the wave under way.
@Test func anOperatorsSendReachesEveryShardAndARetryGoesToItsShard() async throws {
    try await withLiveRelay(
        .standard.routes(
            """
              - {name: stale, waves: {shards: 4, spreadSeconds: 4000, topic: "PUSH_RC_{shard}"}, data: {CONFIG_STATE: STALE, V: "{{version}}"}}
            """
        ).environment(["RC_RELAY_DELIVERY_DRAIN_SECONDS": "0"])  // the shards still waiting do not hold the test's stop
    ) { relay in
        let sent = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "8"}, "route": "stale"}"#)
        #expect(try sent.deliveries.map(\.route).sorted() == ["stale@0", "stale@1", "stale@2", "stale@3"])
        #expect(try sent.deliveries.allSatisfy { $0.status == .accepted })
        let topics = await relay.recordedMessages().compactMap { $0["topic"] as? String }.sorted()
        #expect(topics == ["PUSH_RC_0", "PUSH_RC_1", "PUSH_RC_2", "PUSH_RC_3"])
        #expect(try await relay.admin(.GET, "/admin/schedules").decode(Components.Schemas.Schedules.self).waves.isEmpty)

        // A webhook's wave: shard 0 goes at once and FCM refuses it; the rest wait their turns (1000 s apart).
        await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
        let answer = try await relay.post(#"{"versionNumber": "9"}"#)
        // No spool: nothing is acknowledged while shards wait, so the sender is told to come back (its retry joins).
        #expect(answer.status == 503, "\(answer.text)")
        var found: Components.Schemas.DeliveryRecord?
        try await eventually("shard 0's ping settles") {
            found = try await relay.admin(.GET, "/admin/deliveries?version=9&route=stale@0").deliveries.first { $0.status != .pending }
            return found != nil
        }
        let record = try #require(found)
        #expect(record.status == .failed && record.shard == 0 && record.shards == 4)
        let retried = try await relay.admin(.POST, "/admin/deliveries/\(record.id)/retry")
        #expect(retried.status == 200, "\(retried.text)")
        #expect(try retried.record.status == .accepted)
        let last = await relay.recordedMessages().last
        #expect(last?["topic"] as? String == "PUSH_RC_0")
        #expect((last?["data"] as? [String: Any])?["V"] as? String == "9")
        let waves = try await relay.admin(.GET, "/admin/schedules").decode(Components.Schemas.Schedules.self).waves
        #expect(waves.map(\.versionNumber) == ["9"] && waves.first?.sent == 1, "the wave goes on")
    }
}
