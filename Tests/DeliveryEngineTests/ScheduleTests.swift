import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import ServiceLifecycle
import Testing

@testable import DeliveryEngine

// Quiet periods (`debounceSeconds`) and staged waves (`waves`), on the engine's clock: every time below is exact,
// because nothing moves unless the test moves it.

private let logger: Logger = {
    var logger = Logger(label: "schedule-test")
    logger.logLevel = .critical
    return logger
}()

/// FCM as the test scripts it, recording when (on the engine's clock) each message was sent, and to whom.
private final class TimedSender: MessageSender {
    let service = "FCM"
    struct Sent: Equatable {
        var at: Duration
        var topic: String
        var version: Int
    }
    private let state: NIOLockedValueBox<(script: [SendFailure?], sent: [Sent])>
    let clock: ManualDeliveryClock

    init(clock: ManualDeliveryClock, script: [SendFailure?] = []) {
        self.clock = clock
        state = NIOLockedValueBox((script, []))
    }

    var sent: [Sent] { state.withLockedValue { $0.sent } }

    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        let message = ByteBuffer(bytes: payload.encoded)
        if let reason = await beforeRequest() { throw .withheld(reason) }
        let object = try! JSONSerialization.jsonObject(with: Data(String(buffer: message).utf8)) as! [String: Any]
        let topic = object["topic"] as? String ?? "?"
        let version = Int((object["data"] as? [String: String])?["V"] ?? "") ?? -1
        let at = clock.instant()
        let failure = state.withLockedValue { state -> SendFailure? in
            state.sent.append(Sent(at: at, topic: topic, version: version))
            return state.script.isEmpty ? nil : state.script.removeFirst()
        }
        if let failure { throw failure }
        return "projects/\(project)/messages/\(at)"
    }

    static let quotaExceeded = SendFailure(.throttled, "FCM answered 429 QUOTA_EXCEEDED", httpStatus: 429, errorCode: "QUOTA_EXCEEDED")
}

private func route(debounce: Int? = nil, waves: RouteDefinition.WavesDefinition? = nil) -> Route {
    try! Route(
        RouteDefinition(
            name: "stale", topic: waves == nil ? "PUSH_RC" : nil, data: ["V": "{{version}}"], debounceSeconds: debounce, waves: waves),
        index: 0)
}

private func plan(_ route: Route, version: Int, sender: any MessageSender) -> DeliveryPlan {
    DeliveryPlan(
        pings: route.pings(of: route.message(for: record(version).version, project: "p"), project: "p"),
        send: SendPlan(sender: sender, policy: RetryPolicy()))
}

/// An engine on `clock` for the duration of `body`, then stopped: with `frozen`, at once, on a clock that no longer
/// moves (no drain grace, no turn comes during the stop); else with time released, so what waits goes.
private func withEngine(
    clock: ManualDeliveryClock, spool: (any Spool)? = nil, frozen: Bool = false,
    replan: @escaping @Sendable (EventRecord) -> DeliveryPlan? = { _ in nil }, _ body: (DeliveryEngine, ServiceGroup) async throws -> Void
) async throws {
    var settings = EngineSettings()
    if frozen { settings.drainGrace = .zero }
    let engine = DeliveryEngine(settings: settings, spool: spool, metrics: noMetrics, clock: clock, logger: logger, replan: replan)
    let group = ServiceGroup(services: [engine], gracefulShutdownSignals: [], logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        try await body(engine, group)
        if !frozen { clock.release() }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
    }
}

/// Moves the clock to `instant`, one pending callback at a time, so each woken ping acts before the next wakes.
private func advance(_ clock: ManualDeliveryClock, to instant: Duration) {
    clock.advance(by: max(.zero, instant - clock.instant()))
}

/// Delivers the event and acknowledges it as a `202` does: its pings wait (a quiet period, a wave's turns), so the
/// first news is "later", and the event is then on disk.
private func deliverAcknowledged(_ event: EventRecord, plan: DeliveryPlan, to engine: DeliveryEngine) async throws {
    guard case .pending(let delivery, _) = await engine.deliver(event, plan: plan, wait: .seconds(5), logger: logger) else {
        Issue.record("version \(event.version.versionNumber): a ping that waits is answered 'later'")
        throw CancellationError()
    }
    guard case .spooled = try engine.acknowledge(delivery) else {
        Issue.record("version \(event.version.versionNumber): expected it spooled for its 202")
        throw CancellationError()
    }
}

@Test func tenVersionsInSixtySecondsWithAThirtySecondQuietPeriodMakeOnePingWithTheNewest() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let stale = route(debounce: 30)
    try await withEngine(clock: clock) { engine, _ in
        for version in 1...10 {
            advance(clock, to: .seconds(6 * (version - 1)))
            guard
                case .pending(_, let later) = await engine.deliver(
                    record(version), plan: plan(stale, version: version, sender: sender), wait: .seconds(5), logger: logger)
            else {
                Issue.record("version \(version): a ping in its quiet period is answered 'later'")
                return
            }
            #expect(later == .seconds(30))
            await clock.waitForPending { $0.contains(.seconds(30)) }  // its quiet period has begun
            #expect(engine.schedules.quietPeriods.map(\.version) == [Int64(version)], "the newest version waits")
        }
        #expect(sender.sent.isEmpty, "nothing goes within the quiet period")
        advance(clock, to: .seconds(54 + 29))
        #expect(sender.sent.isEmpty)
        advance(clock, to: .seconds(54 + 30))
        try await eventually("the newest version's ping") { sender.sent.count == 1 }
        try await eventually("every version settled") { engine.history.list(.init()).allSatisfy { $0.report != nil } }
        #expect(sender.sent == [.init(at: .seconds(84), topic: "PUSH_RC", version: 10)])
        let statuses = engine.history.list(.init()).map { ($0.version.versionNumber, $0.report!.status) }
        #expect(statuses.filter { $0.1 == .superseded }.map(\.0).sorted() == Array(1...9), "\(statuses)")
        #expect(statuses.filter { $0.1 == .accepted }.map(\.0) == [10])
        #expect(engine.schedules.quietPeriods.isEmpty)
    }
}

@Test func anOlderVersionArrivingInANewerOnesQuietPeriodStandsDownAtOnce() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let stale = route(debounce: 30)
    try await withEngine(clock: clock) { engine, _ in
        _ = await engine.deliver(record(7), plan: plan(stale, version: 7, sender: sender), wait: .zero, logger: logger)
        await clock.waitForPending { $0.contains(.seconds(30)) }  // version 7 waits out its quiet period
        let late = await engine.deliver(record(6), plan: plan(stale, version: 6, sender: sender), wait: .seconds(5), logger: logger)
        guard case .settled(let reports, false) = late else {
            Issue.record("the late version settles at once: \(late)")
            return
        }
        #expect(reports.map(\.status) == [.superseded])
        advance(clock, to: .seconds(30))
        try await eventually("version 7's ping") { sender.sent.count == 1 }
        #expect(sender.sent.map(\.version) == [7])
    }
}

@Test func wavesOfTenShardsOverSixtySecondsPingEachShardAtItsTurn() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let waved = route(waves: .init(shards: 10, spreadSeconds: 60, topic: "PUSH_RC_{shard}"))
    try await withEngine(clock: clock) { engine, _ in
        _ = await engine.deliver(record(1), plan: plan(waved, version: 1, sender: sender), wait: .zero, logger: logger)
        try await eventually("shard 0 at once") { sender.sent.count == 1 }
        for turn in 1..<10 {
            await clock.waitForPending { $0.filter { $0 > .zero }.count >= 10 - turn }
            let wave = try #require(engine.schedules.waves.first)
            #expect(wave.sent == turn && wave.shards == 10 && wave.version == 1)
            advance(clock, to: .seconds(6 * turn))
            try await eventually("shard \(turn)") { sender.sent.count == turn + 1 }
        }
        #expect(sender.sent == (0..<10).map { .init(at: .seconds(6 * $0), topic: "PUSH_RC_\($0)", version: 1) })
        try await eventually("the wave ends with its last shard") { engine.schedules.waves.isEmpty }
        #expect(engine.history.list(.init()).allSatisfy { $0.report?.status == .accepted })
    }
}

@Test func aNewerVersionAtShardFourTakesTheWaveOverAndRepingsTheShardsAlreadyPinged() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let waved = route(waves: .init(shards: 10, spreadSeconds: 60, topic: "PUSH_RC_{shard}"))
    try await withEngine(clock: clock) { engine, _ in
        _ = await engine.deliver(record(1), plan: plan(waved, version: 1, sender: sender), wait: .zero, logger: logger)
        try await eventually("shard 0 at once") { sender.sent.count == 1 }
        for turn in 1...3 {
            await clock.waitForPending { $0.filter { $0 > .zero }.count >= 10 - turn }
            advance(clock, to: .seconds(6 * turn))
            try await eventually("shard \(turn)") { sender.sent.count == turn + 1 }
        }
        // Shards 0-3 have version 1; version 2 arrives before shard 4's turn (24 s).
        advance(clock, to: .seconds(20))
        _ = await engine.deliver(record(2), plan: plan(waved, version: 2, sender: sender), wait: .zero, logger: logger)
        await clock.waitForPending { $0.filter { $0 > .zero }.count >= 6 + 10 }
        let wave = try #require(engine.schedules.waves.first)
        #expect(wave.version == 2 && wave.shards == 10 && wave.sent == 0)
        for seconds in stride(from: 24, through: 78, by: 6) {
            advance(clock, to: .seconds(seconds))
            try await eventually("the turn at \(seconds) s") { sender.sent.last?.at == .seconds(seconds) }
        }
        try await eventually("every ping settled") { engine.history.list(.init()).allSatisfy { $0.report != nil } }
        var versions: [String: [Int]] = [:]
        for sent in sender.sent { versions[sent.topic, default: []].append(sent.version) }
        for shard in 0..<4 { #expect(versions["PUSH_RC_\(shard)"] == [1, 2], "shard \(shard)") }
        for shard in 4..<10 { #expect(versions["PUSH_RC_\(shard)"] == [2], "shard \(shard)") }
        // Version 2 kept version 1's turns for shards 4-9, then went to 0-3 at the same spacing.
        #expect(sender.sent.filter { $0.version == 2 }.map(\.at) == stride(from: 24, through: 78, by: 6).map { .seconds($0) })
        let stoodDown = engine.history.list(.init()).filter { $0.report?.status == .superseded }.map(\.route).sorted()
        #expect(stoodDown == (4..<10).map { "stale@\($0)" })
    }
}

@Test func a429MidWavePostponesTheTurnsStillToComeAndLosesNothing() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock, script: [nil, nil, TimedSender.quotaExceeded])
    let waved = route(waves: .init(shards: 10, spreadSeconds: 60, topic: "PUSH_RC_{shard}"))
    try await withEngine(clock: clock) { engine, _ in
        _ = await engine.deliver(record(1), plan: plan(waved, version: 1, sender: sender), wait: .zero, logger: logger)
        try await eventually("shard 0 at once") { sender.sent.count == 1 }
        for turn in 1...2 {
            await clock.waitForPending { $0.filter { $0 > .zero }.count >= 10 - turn }
            advance(clock, to: .seconds(6 * turn))
            try await eventually("shard \(turn)") { sender.sent.count == turn + 1 }
        }
        // Shard 2 got the 429 at 12 s: it retries after FCM's minute, and no later turn comes before that retry (the
        // turns move together, 54 s). Each shard still waiting learns it at its old turn (one turn at a time: a woken
        // ping measures its next wait from the clock's time then).
        await clock.waitForPending { $0.contains(.seconds(60)) }
        for old in stride(from: 18, through: 54, by: 6) {
            advance(clock, to: .seconds(old))
            await clock.waitForPending { $0.contains(.seconds(54)) }
        }
        #expect(sender.sent.count == 3, "no turn came during FCM's minute")
        advance(clock, to: .seconds(72))
        try await eventually("the retry and shard 3 at 72 s") { sender.sent.count == 5 }
        for seconds in stride(from: 78, through: 108, by: 6) {
            advance(clock, to: .seconds(seconds))
            try await eventually("the send at \(seconds) s") { sender.sent.last?.at == .seconds(seconds) }
        }
        try await eventually("every ping settled") { engine.history.list(.init()).allSatisfy { $0.report != nil } }
        let accepted = sender.sent.dropFirst(3)
        #expect(Array(sender.sent.prefix(3).map(\.at)) == [.zero, .seconds(6), .seconds(12)])
        #expect(accepted.map(\.topic).sorted() == (2..<10).map { "PUSH_RC_\($0)" })
        #expect(accepted.map(\.at) == [72, 72, 78, 84, 90, 96, 102, 108].map { .seconds($0) })
        #expect(engine.history.list(.init()).allSatisfy { $0.report?.status == .accepted })
    }
}

@Test func aStopMidWaveSpoolsTheShardsStillDueAndTheNextStartResumesWithThem() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let spool = RecordingSpool()
    let waved = route(waves: .init(shards: 10, spreadSeconds: 60, topic: "PUSH_RC_{shard}"))
    try await withEngine(clock: clock, spool: spool, frozen: true) { engine, _ in
        try await deliverAcknowledged(record(1), plan: plan(waved, version: 1, sender: sender), to: engine)
        try await eventually("shard 0 at once") { sender.sent.count == 1 }
        for turn in 1...3 {
            await clock.waitForPending { $0.filter { $0 > .zero }.count >= 10 - turn }
            advance(clock, to: .seconds(6 * turn))
            try await eventually("shard \(turn)") { sender.sent.count == turn + 1 }
        }
    }
    let spooled = try #require(spool.files.withLockedValue { Array($0.values) }.first)
    #expect(spooled.routes?.sorted() == (4..<10).map { "stale@\($0)" }, "only the shards not yet pinged are still due")

    // The next start: the wave resumes with shards 4-9, one spacing apart from now, and pings none twice.
    let restarted = ManualDeliveryClock()
    let again = TimedSender(clock: restarted)
    try await withEngine(clock: restarted, spool: spool, replan: { plan(waved, version: $0.version.versionNumberInt, sender: again) }) { engine, _ in
        try await eventually("shard 4 at once") { again.sent.count == 1 }
        for turn in 1..<6 {
            await restarted.waitForPending { $0.filter { $0 > .zero }.count >= 6 - turn }
            advance(restarted, to: .seconds(6 * turn))
            try await eventually("turn \(turn)") { again.sent.count == turn + 1 }
        }
        try await eventually("the spool file goes once every shard is accepted") { spool.files.withLockedValue { $0.isEmpty } }
    }
    #expect(again.sent == (4..<10).enumerated().map { .init(at: .seconds(6 * $0.offset), topic: "PUSH_RC_\($0.element)", version: 1) })
    #expect(Set(sender.sent.map(\.topic)).isDisjoint(with: again.sent.map(\.topic)), "no shard pinged twice for version 1")
}

extension TemplateVersion {
    fileprivate var versionNumberInt: Int { Int(versionNumber) }
}

@Test func severalQuotaErrorsPostponeAWaveOnceNotOncePerError() {
    let clock = ManualDeliveryClock()
    let schedules = Schedules(clock: clock)
    let key = Schedules.Key(project: "p", route: "stale")
    let all = Array(0..<10)
    #expect(schedules.turn(key, version: 1, shard: 0, present: all, spacing: .seconds(6))?.at == .zero)
    schedules.sent(key, version: 1, shard: 0)
    clock.advance(by: .seconds(6))
    schedules.sent(key, version: 1, shard: 1)
    // Two pings got a 429 at 6 s, each retrying in 60 s: the turns still to come start at 66 s, once.
    schedules.postpone(key, by: .seconds(60))
    schedules.postpone(key, by: .seconds(60))
    let turns = (2..<10).map { schedules.turn(key, version: 1, shard: $0, present: all, spacing: .seconds(6))?.at }
    #expect(turns == (0..<8).map { .seconds(66 + 6 * $0) })
    // A newer version's ping stops as superseded; the wave is held by it.
    #expect(schedules.turn(key, version: 2, shard: 5, present: all, spacing: .seconds(6)) != nil)
    #expect(schedules.isHeldByNewer(key, than: 1) && !schedules.isHeldByNewer(key, than: 2))
    #expect(schedules.turn(key, version: 1, shard: 5, present: all, spacing: .seconds(6)) == nil)
}

@Test func discardingAnotherRoutesDeadPingDoesNotCutAQuietPeriodShort() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock, script: [ScriptedSender.unavailable()])  // the immediate route's one attempt
    let spool = RecordingSpool()
    let now = try Route(RouteDefinition(name: "now", topic: "NOW", data: ["V": "{{version}}"]), index: 0)
    let quiet = route(debounce: 600)
    let pings = [now, quiet].flatMap { $0.pings(of: $0.message(for: record(5).version, project: "p"), project: "p") }
    let plan = DeliveryPlan(pings: pings, send: SendPlan(sender: sender, policy: RetryPolicy(maximumAttempts: 1)))
    try await withEngine(clock: clock, spool: spool) { engine, _ in
        try await deliverAcknowledged(record(5), plan: plan, to: engine)
        try await eventually("the immediate route's ping dies") { engine.history.list(.init(route: "now")).first?.report?.status == .dead }
        await clock.waitForPending { $0.contains(.seconds(600)) }
        #expect(engine.discard(key: "p/version/5", route: "now"))
        await clock.waitForPending { $0.contains(.seconds(600)) }  // the quiet period waits on, to its end
        advance(clock, to: .seconds(599))
        #expect(sender.sent.count == 1, "nothing more within the quiet period")
        advance(clock, to: .seconds(600))
        try await eventually("the quiet route's ping at the period's end") { sender.sent.count == 2 }
        #expect(sender.sent.last == .init(at: .seconds(600), topic: "PUSH_RC", version: 5))
    }
}

@Test func aStopDuringATakeOverSpoolsOnlyTheNewerVersionsShards() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let spool = RecordingSpool()
    let waved = route(waves: .init(shards: 4, spreadSeconds: 40, topic: "PUSH_RC_{shard}"))
    try await withEngine(clock: clock, spool: spool, frozen: true) { engine, _ in
        for version in [1, 2] {
            try await deliverAcknowledged(record(version), plan: plan(waved, version: version, sender: sender), to: engine)
            if version == 1 { try await eventually("version 1's shard 0 at once") { sender.sent.count == 1 } }
            await clock.waitForPending { $0.filter { $0 > .zero }.count >= (version == 1 ? 3 : 3 + 4) }
        }
        // Version 2 took the wave over at 0 s: it owes shards 1-3 at version 1's turns, and shard 0 again after them.
        #expect(sender.sent.map(\.version) == [1])
    }
    let files = spool.files.withLockedValue { Array($0.values) }
    #expect(files.map(\.version.versionNumber) == [2], "version 1 owes nothing a newer version does not: \(files.map(\.version.versionNumber))")
    #expect(files.first?.routes?.sorted() == ["stale@0", "stale@1", "stale@2", "stale@3"])
    #expect(sender.sent == [.init(at: .zero, topic: "PUSH_RC_0", version: 1)])
}

@Test func aCrashMidWaveResumesWithTheShardsFCMHasNotAccepted() async throws {
    let clock = ManualDeliveryClock()
    let sender = TimedSender(clock: clock)
    let spool = RecordingSpool()
    let waved = route(waves: .init(shards: 4, spreadSeconds: 40, topic: "PUSH_RC_{shard}"))
    var onDisk: EventRecord?
    try await withEngine(clock: clock, spool: spool, frozen: true) { engine, _ in
        try await deliverAcknowledged(record(1), plan: plan(waved, version: 1, sender: sender), to: engine)
        try await eventually("shard 0") { sender.sent.count == 1 }
        await clock.waitForPending { $0.filter { $0 > .zero }.count >= 3 }
        advance(clock, to: .seconds(10))
        try await eventually("shard 1 accepted and written down") { spool.files.withLockedValue { $0.values.first?.done?.count == 2 } }
        onDisk = spool.files.withLockedValue { $0.values.first }  // what a crash right now would leave
    }
    let crashed = try #require(onDisk)
    #expect(crashed.routes == nil && crashed.done?.sorted() == ["stale@0", "stale@1"])

    let restarted = ManualDeliveryClock()
    let again = TimedSender(clock: restarted)
    let survivors = RecordingSpool(files: [crashed])
    try await withEngine(clock: restarted, spool: survivors, replan: { plan(waved, version: Int($0.version.versionNumber), sender: again) }) { _, _ in
        try await eventually("shard 2 at once") { again.sent.count == 1 }
        await restarted.waitForPending { $0.contains(.seconds(10)) }
        advance(restarted, to: .seconds(10))
        try await eventually("the spool file goes once the wave is done") { survivors.files.withLockedValue { $0.isEmpty } }
    }
    #expect(again.sent.map(\.topic) == ["PUSH_RC_2", "PUSH_RC_3"], "the shards accepted before the crash are not pinged again")
}
