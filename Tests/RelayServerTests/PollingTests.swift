import AsyncHTTPClient
import DeliveryEngine
import FCMEmulator
import Foundation
import Testing

@testable import RelayServer

/// Catch-up polling against the emulator's Remote Config: what it pings is read from the FCM messages the emulator
/// recorded, and polls happen when the test moves the clock.
@Suite struct PollingTests {
    static let interval = Duration.seconds(300)

    static func template(_ greeting: String = "Welcome") throws -> Data {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Fixtures/templates/welcome.json"), encoding: .utf8)
        return Data(text.replacingOccurrences(of: "\"Welcome\"", with: "\"\(greeting)\"").utf8)
    }

    /// Publishes `count` versions of the demo project; returns the newest version number.
    @discardableResult
    static func publish(_ state: EmulatorState, count: Int = 1, project: String = "demo-project") async throws -> Int {
        var newest = 0
        for index in 0..<count { newest = try await state.templates.publish(project: project, template: template("Hello \(index)")).versionNumber }
        return newest
    }

    /// A relay that polls the emulator every 300 s of `clock`'s time, with `grace` for webhooks.
    static func polling(_ clock: ManualDeliveryClock, grace: Int = 0, published: Int = 3) -> RelaySetup {
        RelaySetup.standard.clock(clock)
            .environment([
                "RC_RELAY_REMOTE_CONFIG_BASE_URL": "EMULATOR", "RC_RELAY_POLL_INTERVAL_SECONDS": "300", "RC_RELAY_POLL_GRACE_SECONDS": "\(grace)",
            ])
            .seed { state in if published > 0 { try await publish(state, count: published) } }
    }

    /// Returns once a poll has ended (the poller waits for its next turn).
    static func pollEnded(_ clock: ManualDeliveryClock) async { await clock.waitForPending { $0.contains(interval) } }

    /// Moves to the next poll and returns once it has ended.
    static func nextPoll(_ clock: ManualDeliveryClock) async {
        await pollEnded(clock)
        clock.advance(by: interval)
        await pollEnded(clock)
    }

    static func pings(_ relay: LiveRelay) async -> [(topic: String?, data: [String: String])] {
        await relay.recordedMessages().map { message in (message["topic"] as? String, message["data"] as? [String: String] ?? [:]) }
    }

    static func polls(_ relay: LiveRelay, _ outcome: String) async throws -> Int {
        let metrics = try await relay.send(HTTPClientRequest(url: relay.relayURL + "/metrics")).text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("rc_relay_polls_total{outcome=\"\(outcome)\"}") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    // MARK: Tests

    @Test func startAdoptsTheCurrentVersionWithoutAPing() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).isEmpty)
            let currentPolls = try await Self.polls(relay, "current")
            #expect(currentPolls == 2)
            #expect(await relay.emulator.stats.remoteConfigRequests == 2)
        }
    }

    @Test func aVersionNoWebhookAnnouncedIsPingedByTheNextPoll() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            let version = try await Self.publish(relay.emulator)
            await Self.nextPoll(clock)
            let pings = await Self.pings(relay)
            #expect(pings.count == 1)
            #expect(pings.first?.topic == "PUSH_RC")
            #expect(pings.first?.data["CONFIG_STATE"] == "STALE")
            let record = try #require(try await relay.admin(.GET, "/admin/deliveries").deliveries.first)
            #expect(record.origin == .poll)
            #expect(record.versionNumber == "\(version)")
            let relayedPolls = try await Self.polls(relay, "relayed")
            #expect(relayedPolls == 1)
            await Self.nextPoll(clock)  // relayed once: the next poll finds nothing new
            #expect(await Self.pings(relay).count == 1)
        }
    }

    @Test func aVersionAWebhookAnnouncedIsNotPingedAgain() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            let version = try await Self.publish(relay.emulator)
            #expect(try await relay.post(#"{"versionNumber": "\#(version)"}"#).status == 200)
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).count == 1)
            let currentPolls = try await Self.polls(relay, "current")
            #expect(currentPolls == 2)
        }
    }

    /// Issue #51's one path: a webhook and a poll move the newest-relayed mark by one rule (``EventPath``), so a version
    /// whose webhook's ping ran out of retries is not relayed, and the next poll relays it.
    @Test func aVersionWhoseWebhookPingDiedIsRelayedByTheNextPoll() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock).environment(["RC_RELAY_DELIVERY_MAX_ATTEMPTS": "1"])) { relay in
            await Self.pollEnded(clock)
            let version = try await Self.publish(relay.emulator)
            await relay.emulator.inject(.init(status: 503, count: 1))
            #expect(try await relay.post(#"{"versionNumber": "\#(version)"}"#).status == 502)  // delivery-failed: it died
            #expect(await Self.pings(relay).isEmpty)
            await Self.nextPoll(clock)
            let pings = await Self.pings(relay)
            #expect(pings.count == 1)
            #expect(try await Self.polls(relay, "relayed") == 1)
            await Self.nextPoll(clock)  // relayed now: the next poll finds nothing new
            #expect(await Self.pings(relay).count == 1)
        }
    }

    @Test func aPollAndALateWebhookOfOneVersionMakeOnePing() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            let version = try await Self.publish(relay.emulator)
            await Self.nextPoll(clock)
            let late = try await relay.post(#"{"versionNumber": "\#(version)"}"#)
            #expect(late.status == 200)
            #expect(try late.delivered.duplicate == true)
            #expect(await Self.pings(relay).count == 1)
        }
    }

    @Test func missedVersionsOverSeveralPagesMakeOnePingForTheNewest() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            let newest = try await Self.publish(relay.emulator, count: 45)
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).count == 1)
            #expect(try await relay.admin(.GET, "/admin/deliveries").deliveries.first?.versionNumber == "\(newest)")
            // The first poll read one page; this one read pages of 20 until it reached version 3: three.
            #expect(await relay.emulator.stats.remoteConfigRequests == 1 + 3)
        }
    }

    @Test func aVersionInsideItsGracePeriodWaitsForItsWebhook() async throws {
        let clock = ManualDeliveryClock(start: Date())  // Remote Config stamps versions with the real time
        try await withLiveRelay(Self.polling(clock, grace: 600)) { relay in
            await Self.pollEnded(clock)
            let version = try await Self.publish(relay.emulator)
            await Self.nextPoll(clock)
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).isEmpty)
            let waitingPolls = try await Self.polls(relay, "waiting")
            #expect(waitingPolls == 2)
            await Self.nextPoll(clock)  // 900 s after the publish: no webhook came, so the poll relays it
            #expect(await Self.pings(relay).count == 1)
            #expect(try await relay.admin(.GET, "/admin/deliveries").deliveries.first?.versionNumber == "\(version)")
        }
    }

    @Test func aRemoteConfigOutageMeansNoPingUntilItEnds() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            try await Self.publish(relay.emulator)
            await relay.emulator.inject(.init(status: 403, endpoint: "remoteConfig"))  // permanent: no retry
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).isEmpty)
            let failedPolls = try await Self.polls(relay, "failed")
            #expect(failedPolls == 1)
            // 503s are retried by FCM's rules (on the test's clock), and the poll then succeeds.
            await relay.emulator.inject(.init(status: 503, endpoint: "remoteConfig", count: 2))
            clock.advance(by: Self.interval)
            try await advanceThroughRetries(clock, times: 2)
            await Self.pollEnded(clock)
            #expect(await Self.pings(relay).count == 1)
        }
    }

    @Test func garbageHugeNumbersAndLoopingPagesEndInALogLineNotACrash() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock)) { relay in
            await Self.pollEnded(clock)
            // Garbage is retried like a 5xx (a proxy's error page may pass); three in a row fail the poll.
            await relay.emulator.inject(.init(endpoint: "remoteConfig", count: 3, body: "<html>502 Bad Gateway</html>"))
            clock.advance(by: Self.interval)
            try await advanceThroughRetries(clock, times: 2)
            await Self.pollEnded(clock)
            await relay.emulator.inject(.init(endpoint: "remoteConfig", body: #"{"versions": [{"versionNumber": "99999999999999999999999"}]}"#))
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).isEmpty)
            // A list whose next page is always the same page: read twice, then the loop is seen and the poll ends.
            let looping = #"{"versions": [{"versionNumber": "9", "updateTime": "2026-11-21T09:14:03.512Z"}], "nextPageToken": "again"}"#
            await relay.emulator.inject(.init(endpoint: "remoteConfig", count: 50, body: looping))
            let before = await relay.emulator.stats.remoteConfigRequests
            await Self.nextPoll(clock)
            #expect(await relay.emulator.stats.remoteConfigRequests - before == 2)
            #expect(await Self.pings(relay).count == 1)
            let failedPolls = try await Self.polls(relay, "failed")
            #expect(failedPolls == 1)
        }
    }

    @Test func pollOnlyModeNeedsNoWebhookSection() async throws {
        let clock = ManualDeliveryClock()
        try await withLiveRelay(Self.polling(clock).webhook(nil)) { relay in
            let refused = try await relay.post(#"{"versionNumber": "4"}"#)
            #expect(refused.status == 404)
            #expect(refused.problemType == "urn:rc-relay:problem:not-found")
            await Self.pollEnded(clock)
            try await Self.publish(relay.emulator)
            await Self.nextPoll(clock)
            #expect(await Self.pings(relay).count == 1)
        }
    }

    @Test func aVersionPublishedWhileTheRelayWasDownIsPingedOnceOnTheNextStart() async throws {
        let spool = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-poll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: spool) }
        // Each run has a fresh emulator; its history is what Remote Config would hold at that start.
        for (published, expected) in [(3, 0), (5, 1), (5, 0)] {
            let clock = ManualDeliveryClock()
            try await withLiveRelay(Self.polling(clock, published: published).environment(["RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool])) { relay in
                await Self.pollEnded(clock)
                #expect(await Self.pings(relay).count == expected, "start with \(published) versions published")
            }
        }
    }
}
