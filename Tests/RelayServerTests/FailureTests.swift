import FCMEmulator
import Foundation
import Testing

@testable import DeliveryEngine
@testable import RelayServer

// MARK: Tests

@Test func unavailableThreeTimesThenDeliveredOnceHonouringRetryAfter() async throws {
    let clock = ManualDeliveryClock()
    try await withLiveRelay(.standard.environment(["RC_RELAY_DELIVERY_MAX_ATTEMPTS": "5"]).clock(clock)) { relay in
        await relay.emulator.inject(.init(status: 503, retryAfter: "30", count: 3))
        let answer = try await relay.post(#"{"versionNumber":21}"#)
        // The first failure is the outcome the sender can act on: retry after FCM's Retry-After.
        #expect(answer.status == 503)
        #expect(answer.headers["retry-after"] == "30")
        try await advanceThroughRetries(clock, times: 3)
        let settled = try await relay.settledDelivery(version: 21)
        #expect(settled.status == .accepted)
        #expect(settled.attempts.compactMap(\.httpStatus) == [503, 503, 503, 200])
        let at = settled.attempts.map(\.at)
        #expect(at.count == 4)
        for (earlier, later) in zip(at, at.dropFirst()) { #expect(later.timeIntervalSince(earlier) >= 30, "Retry-After is never undercut") }
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func quotaExceededWaitsAtLeastTheQuotaDelay() async throws {
    let clock = ManualDeliveryClock()
    try await withLiveRelay(.standard.environment(["RC_RELAY_DELIVERY_QUOTA_DELAY_SECONDS": "60"]).clock(clock)) { relay in
        await relay.emulator.inject(.init(status: 429, errorCode: "QUOTA_EXCEEDED"))
        let answer = try await relay.post(#"{"versionNumber":22}"#)
        #expect(answer.status == 503)
        await clock.waitForPending()
        #expect(clock.pendingDelays.allSatisfy { $0 >= .seconds(60) }, "a 429 waits at least the quota delay: \(clock.pendingDelays)")
        clock.advance(by: clock.pendingDelays.max()!)
        let at = try await relay.settledDelivery(version: 22).attempts.map(\.at)
        #expect(at.count == 2)
        #expect(at.count == 2 && at[1].timeIntervalSince(at[0]) >= 60)
    }
}

@Test func invalidArgumentIsTriedOnceAndReportedWithFCMsCode() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT", count: 5))
        let answer = try await relay.post(#"{"versionNumber":23}"#)
        // Retrying cannot help, so the sender is told 200 (and not asked to retry); the body says it failed.
        #expect(answer.status == 200)
        #expect(answer.headers["content-type"]?.hasPrefix("application/json") == true)
        let delivered = try answer.delivered
        #expect(delivered.status == .failed)
        let report = delivered.deliveries.first
        #expect(report?.status == .failed)
        #expect(report?.attempts.count == 1)
        #expect(report?.error?.httpStatus == 400)
        #expect(report?.error?.errorCode == "INVALID_ARGUMENT")
        #expect(await relay.emulator.stats.sendRequests == 1)
    }
}

@Test func aPingThatKeepsFailingIsDeadAfterItsAttempts() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 503, count: 10))
        let answer = try await relay.post(#"{"versionNumber":24}"#)
        #expect(answer.status == 503)
        let settled = try await relay.settledDelivery(version: 24)
        #expect(settled.status == .dead)
        #expect(settled.attempts.count == 3)
        #expect(await relay.emulator.stats.sendRequests == 3)
        #expect(await relay.emulator.messages.isEmpty)
    }
}

@Test func aDroppedConnectionIsRetried() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(drop: true))
        let answer = try await relay.post(#"{"versionNumber":25}"#)
        #expect(answer.status == 503)
        let attempts = try await relay.settledDelivery(version: 25).attempts
        #expect(attempts.count == 2)
        #expect(attempts.first?.httpStatus == nil)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func latencyBeyondTheTimeoutIsRetried() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_FCM_TIMEOUT_SECONDS": "1"])) { relay in
        await relay.emulator.inject(.init(latencyMs: 2500))
        let answer = try await relay.post(#"{"versionNumber":26}"#)
        #expect(answer.status == 503)
        let settled = try await relay.settledDelivery(version: 26)
        #expect(settled.status == .accepted)
        // The slow attempt timed out (no HTTP status) and was retried; on a loaded machine a retry may time out too.
        #expect(settled.attempts.count >= 2)
        #expect(settled.attempts.first?.httpStatus == nil)
    }
}

@Test func aFailingTokenEndpointIsRetriedWithoutAStorm() async throws {
    try await withLiveRelay(.standard.routes((1...5).map { "  - {name: r\($0), topic: t\($0)}" }.joined(separator: "\n"))) { relay in
        await relay.emulator.inject(.init(status: 503, endpoint: "token"))
        let answer = try await relay.post(#"{"versionNumber":27}"#)
        #expect(answer.status == 503)
        #expect(try await relay.settledDeliveries(version: 27, count: 5).allSatisfy { $0.status == .accepted })
        #expect(await relay.emulator.messages.count == 5)
        // Five pings failed together on one shared token request, then shared the next one.
        #expect(await relay.emulator.stats.tokenRequests == 2)
    }
}

@Test func unreachableFCMEndsDeadAndIsReported() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_FCM_BASE_URL": "http://127.0.0.1:9", "RC_RELAY_FCM_TIMEOUT_SECONDS": "1"])) {
        relay in
        let answer = try await relay.post(#"{"versionNumber":28}"#)
        #expect(answer.status == 503)
        let settled = try await relay.settledDelivery(version: 28)
        #expect(settled.status == .dead)
        #expect(settled.attempts.count == 3)
        #expect(settled.error?.message.contains("could not be reached") == true)
    }
}

@Test func outboundConcurrencyIsBounded() async throws {
    let routes = (1...6).map { "  - {name: r\($0), topic: t\($0)}" }.joined(separator: "\n")
    // The answer waits for the outcome however slow the machine (a sanitizer build, a busy CI runner).
    try await withLiveRelay(
        .standard.routes(routes).environment(["RC_RELAY_DELIVERY_CONCURRENCY": "2", "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "600"])
    ) { relay in
        await relay.emulator.inject(.init(latencyMs: 200, count: 6))
        let started = Date()
        let answer = try await relay.post(#"{"versionNumber":29}"#)
        #expect(answer.status == 200)
        // Never more than two at once. (On a starved machine a send can finish before the next one reaches the
        // emulator, so fewer is possible; that the bound is reached is outboundConcurrencyIsNotCappedByTheConnectionPool's.)
        let most = await relay.emulator.stats.maxConcurrentSends
        #expect((1...2).contains(most), "\(most) at once")
        #expect(Date().timeIntervalSince(started) >= 0.6)  // 6 sends, at most 2 at a time, 200 ms each
    }
}

@Test func outboundConcurrencyIsNotCappedByTheConnectionPool() async throws {
    // The HTTP client's pool defaults to 8 connections per host; rc-relay sizes it to `delivery.concurrency`.
    let routes = (1...24).map { "  - {name: r\($0), topic: t\($0)}" }.joined(separator: "\n")
    try await withLiveRelay(
        .standard.routes(routes).environment(["RC_RELAY_DELIVERY_CONCURRENCY": "16", "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "600"])
    ) { relay in
        await relay.emulator.inject(.init(latencyMs: 400, count: 24))
        let answer = try await relay.post(#"{"versionNumber":30}"#)
        #expect(answer.status == 200, "\(answer.text)")
        #expect(await relay.emulator.stats.maxConcurrentSends > 8)
        #expect(await relay.emulator.stats.maxConcurrentSends <= 16)
    }
}

@Test func aProjectsSendsArePacedAndA429SlowsEveryPingOfIt() async throws {
    let clock = ManualDeliveryClock()
    let routes = (1...4).map { "  - {name: r\($0), topic: T\($0), data: {CONFIG_STATE: STALE}}" }.joined(separator: "\n")
    let setup = RelaySetup.standard.routes(routes).clock(clock).environment([
        "RC_RELAY_DELIVERY_MESSAGES_PER_SECOND": "2", "RC_RELAY_DELIVERY_QUOTA_DELAY_SECONDS": "10",
    ])
    try await withLiveRelay(setup) { relay in
        func metric(_ name: String) async throws -> String {
            let text = try await relay.admin(.GET, "/metrics").text
            return text.split(separator: "\n").first { $0.hasPrefix(name + "{") }.map(String.init) ?? ""
        }
        // Four pings at two a second: two go at once, two wait for their slots, 0.5 s and 1 s on.
        let answer = Task { try await relay.post(#"{"versionNumber": "31"}"#).status }
        await clock.waitForPending { delays in delays.contains(.milliseconds(500)) && delays.contains(.seconds(1)) }
        try await eventually("two pings sent at once") { await relay.emulator.messages.count == 2 }
        clock.advance(by: .seconds(1))
        let answered = try await answer.value
        #expect(answered == 200)
        #expect(await relay.emulator.messages.count == 4)
        let waits = try await metric("rc_relay_paced_waits_total")
        #expect(waits.hasSuffix(" 2"), "\(waits)")

        // A 429 on one ping halves the project's pace for all of them: the next burst is one ping, then a slot a second.
        clock.advance(by: .seconds(60))
        await relay.emulator.inject(.init(status: 429, errorCode: "QUOTA_EXCEEDED"))
        let second = Task { try await relay.post(#"{"versionNumber": "32"}"#).status }
        await clock.waitForPending { $0.contains(.seconds(10)) }  // the refused ping's quota delay
        let cuts = try await metric("rc_relay_pace_cuts_total")
        #expect(cuts.hasSuffix(" 1"), "\(cuts)")
        let info = try await relay.admin(.GET, "/admin/info").decode(Components.Schemas.Info.self)
        #expect(info.pace?.map(\.project) == ["demo-project"])
        #expect(info.pace?.first?.messagesPerSecond == 2 && info.pace?.first?.current == 1)  // halved, and the clock stands still
        clock.release()
        _ = try await second.value
        let settled = try await relay.settledDeliveries(version: 32, count: 4)
        #expect(settled.allSatisfy { $0.status == .accepted }, "nothing is lost: \(settled.map(\.status))")
        #expect(await relay.emulator.messages.count == 8)
    }
}
