import Foundation
import RelayCore
import Testing

@testable import DeliveryEngine

/// Issue #49: a change-aware route's audiences overlap. Its whole topic reaches every narrowed audience's devices, and
/// a condition those of each topic it names, so an older version must not follow a newer one there either. The other
/// way round is no stale ping: the whole audience's other devices need the older version.
private func ping(_ target: FCMMessage.Target, narrowed: Set<String>?, shard: Int? = nil) -> Ping {
    let route = try! Route(RouteDefinition(name: "aware", topic: "RC_ALL"), index: 0)
    var message = route.message(for: record(1).version, project: "p")
    message.target = target
    var ping = Ping(route: shard.map { "aware@\($0)" } ?? "aware", project: "p", message: message)
    ping.narrowedTopics = narrowed
    if let shard { ping.schedule = PingSchedule(shard: .init(index: shard, count: 4, spacing: .seconds(1))) }
    return ping
}

private let whole = ping(.topic("RC_ALL"), narrowed: nil)
private let japanese = ping(.topic("lang_ja"), narrowed: ["lang_ja"])
private let korean = ping(.topic("lang_ko"), narrowed: ["lang_ko"])
private let both = ping(.condition("'lang_ja' in topics || 'lang_ko' in topics"), narrowed: ["lang_ja", "lang_ko"])
private let now = Date(timeIntervalSince1970: 1_800_000_000)

@Test func aNarrowedPingStandsDownBehindANewerVersionToTheWholeAudience() {
    let latest = LatestVersions()
    #expect(latest.start(whole, version: 5, now: now) == .go)
    #expect(latest.start(japanese, version: 4, now: now) == .underWay)  // under way to every device already
    latest.accepted(whole, version: 5)
    #expect(latest.start(japanese, version: 4, now: now) == .behind)  // accepted there
    #expect(latest.start(japanese, version: 6, now: now) == .go)  // a newer version goes
}

@Test func aConditionCoversEachTopicItNamesButNotMore() {
    let latest = LatestVersions()
    #expect(latest.start(both, version: 5, now: now) == .go)
    latest.accepted(both, version: 5)
    #expect(latest.start(japanese, version: 4, now: now) == .behind)
    #expect(latest.start(korean, version: 4, now: now) == .behind)
    // Japanese devices alone heard of 7: an older version to both languages still goes (Korean devices need it).
    #expect(latest.start(japanese, version: 7, now: now) == .go)
    latest.accepted(japanese, version: 7)
    #expect(latest.start(both, version: 6, now: now) == .go)
}

@Test func theWholeAudienceIsNeverCoveredByANarrowedOne() {
    let latest = LatestVersions()
    #expect(latest.start(japanese, version: 5, now: now) == .go)
    latest.accepted(japanese, version: 5)
    #expect(latest.start(whole, version: 4, now: now) == .go)
}

@Test func aWaveShardCoversNoNarrowedAudience() {
    let latest = LatestVersions()
    let shard = ping(.topic("RC_WAVE_0"), narrowed: nil, shard: 0)
    #expect(latest.start(shard, version: 5, now: now) == .go)
    latest.accepted(shard, version: 5)
    #expect(latest.start(japanese, version: 4, now: now) == .go)
}

@Test func anUnderWayClaimLapsesAfterItsLifetimeAndAResetForgetsEverything() {
    let latest = LatestVersions(lifetime: .seconds(60))
    #expect(latest.start(whole, version: 5, now: now) == .go)
    #expect(latest.start(japanese, version: 4, now: now.addingTimeInterval(61)) == .go)
    latest.accepted(whole, version: 9)
    latest.reset(project: "p")
    #expect(latest.start(japanese, version: 8, now: now) == .go)
}

@Test func aTakeOverReadsTheOverlapFromTheSharedHistory() {
    // What another replica's history says FCM accepted: version 7 to a condition naming both languages.
    let engine = DeliveryEngine(settings: EngineSettings(), spool: nil, metrics: noMetrics, logger: quietLogger, replan: { _ in nil })
    var entry = DeliveryHistory.Entry(
        id: "h-1", project: "p", route: "aware", version: record(7).version, eventID: nil, origin: .webhook, retryOf: nil, toDevice: false,
        validateOnly: false, receivedAt: now, settledAt: now, report: DeliveryReport(route: "aware", status: .accepted, attempts: []))
    entry.audience = both.payload.audience
    entry.narrowed = ["lang_ja", "lang_ko"]
    engine.noteAccepted([entry])
    #expect(engine.latest.start(korean, version: 5, now: now) == .behind)
    #expect(engine.latest.start(whole, version: 5, now: now) == .go)
}
