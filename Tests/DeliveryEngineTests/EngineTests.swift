import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore
import ServiceLifecycle
import Testing

@testable import DeliveryEngine

private let logger = quietLogger

private func ping(_ route: String) -> Ping {
    let route = try! Route(RouteDefinition(name: route, topic: "t-\(route)"), index: 0)
    return Ping(route: route.name, project: "p", message: route.message(for: record(1).version, project: "p"))
}

private func plan(_ sender: ScriptedSender, routes: [String] = ["a"], policy: RetryPolicy = RetryPolicy()) -> DeliveryPlan {
    DeliveryPlan(pings: routes.map { ping($0) }, send: SendPlan(sender: sender, policy: policy))
}

// MARK: Tests

@Test func settledEventsAreForgottenAfterTheWindow() async throws {
    // The window on a clock the test moves: ten minutes pass in no time, and a slow machine changes nothing.
    let clock = ManualDeliveryClock()
    try await withRecentEvents(window: .seconds(600), clock: clock) { recent in
        let record = EventRecord(
            keys: ["p/version/40", "p/id/msg_window"], project: "p", eventID: "msg_window", format: "template-version",
            version: try JSONDecoder().decode(TemplateVersion.self, from: Data(#"{"versionNumber":40}"#.utf8)), receivedAt: Date())
        let sent = NIOLockedValueBox(0)
        let work: RecentEvents.Work = { _, _ in
            sent.withLockedValue { $0 += 1 }
            return [DeliveryReport(route: "default", status: .accepted, attempts: [])]
        }
        guard case .settled(_, false) = await recent.deliver(record, wait: .seconds(600), work) else {
            Issue.record("first: not settled")
            return
        }
        clock.advance(by: .seconds(599))
        guard case .settled(_, true) = await recent.deliver(record, wait: .seconds(600), work) else {
            Issue.record("within: not a duplicate")
            return
        }
        clock.advance(by: .seconds(2))
        guard case .settled(_, false) = await recent.deliver(record, wait: .seconds(600), work) else {
            Issue.record("after: still a duplicate")
            return
        }
        #expect(sent.withLockedValue { $0 } == 2)
    }
}

@Test func aNewerVersionSupersedesOnlyWithinTheRetryDeadline() {
    let latest = LatestVersions(lifetime: .seconds(60))
    let start = Date(timeIntervalSince1970: 1_000_000)
    latest.record(project: "p", route: "r", version: 10, now: start)
    #expect(latest.isSuperseded(project: "p", route: "r", version: 9, now: start.addingTimeInterval(59)))
    #expect(!latest.isSuperseded(project: "p", route: "r", version: 10, now: start))
    #expect(!latest.isSuperseded(project: "p", route: "other", version: 9, now: start))
    // Past the deadline no older ping can still be waiting: the record has no purpose and is gone.
    #expect(!latest.isSuperseded(project: "p", route: "r", version: 9, now: start.addingTimeInterval(61)))
    // An expired record no longer holds the route: an older version is recorded over it.
    latest.record(project: "p", route: "r", version: 5, now: start.addingTimeInterval(61))
    #expect(latest.isSuperseded(project: "p", route: "r", version: 4, now: start.addingTimeInterval(62)))
    #expect(!latest.isSuperseded(project: "p", route: "r", version: 5, now: start.addingTimeInterval(62)))
}

/// FCM's retry rules on the test's clock: a Retry-After of 30 s is waited out exactly, not undercut, and each attempt
/// is recorded at the clock's time. No test waits 60 s for this.
@Test func retriesWaitOutFCMsRetryAfterOnTheEnginesClock() async throws {
    let clock = ManualDeliveryClock()
    let sender = ScriptedSender([ScriptedSender.unavailable(retryAfter: .seconds(30)), ScriptedSender.unavailable(retryAfter: .seconds(30))])
    try await withRunningEngine(clock: clock) { engine, _ in
        guard case .pending(let delivery, let retryAfter) = await engine.deliver(record(1), plan: plan(sender), wait: .seconds(5), logger: logger)
        else {
            Issue.record("the first failure should answer 'later'")
            return
        }
        #expect(retryAfter == .seconds(30), "the sender is told FCM's own Retry-After")
        for _ in 2...3 {
            await clock.waitForPending { $0.contains { $0 >= .seconds(30) } }
            let waits = clock.pendingDelays
            #expect(waits.allSatisfy { $0 >= .seconds(30) }, "Retry-After is never undercut: \(waits)")
            clock.advance(by: waits.max()!)
        }
        let reports = try #require(await delivery.reports.value(within: .seconds(60), on: SystemDeliveryClock()))
        #expect(reports.map(\.status) == [.accepted])
        let times = reports[0].attempts.map(\.at)
        #expect(times.count == 3)
        #expect(times[1].timeIntervalSince(times[0]) >= 30 && times[2].timeIntervalSince(times[1]) >= 30)
        #expect(engine.history.list(.init()).first?.report?.status == .accepted)
    }
}

/// An acknowledged event whose retries ran out is parked, not lost: it waits `parkedRetryInterval` on the clock and
/// is tried again, and its spool file goes only once FCM accepts.
@Test func aParkedEventIsTriedAgainAfterTheIntervalAndLeavesTheSpoolWhenAccepted() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool()
    let sender = ScriptedSender([ScriptedSender.unavailable()])
    var settings = EngineSettings()
    settings.parkedRetryInterval = .seconds(300)
    try await withRunningEngine(spool: spool, settings: settings, clock: clock) { engine, _ in
        let event = record(2)
        try spool.write(event)
        guard
            case .pending(let delivery, _) = await engine.deliver(
                event, plan: plan(sender, policy: RetryPolicy(maximumAttempts: 1)), wait: .seconds(5), onDisk: true, logger: logger)
        else {
            Issue.record("a dead ping of an acknowledged event should leave it pending")
            return
        }
        await clock.waitForPending { $0 == [.seconds(300)] }
        #expect(engine.parked == 1)
        #expect(spool.files.withLockedValue { $0.count } == 1, "still on disk while FCM has not accepted it")
        clock.advance(by: .seconds(299))
        // The park's own wait is still the only one, with its last second to go: not run early, not dropped.
        #expect(clock.pendingDelays == [.seconds(1)], "the park waits out the whole interval: \(clock.pendingDelays)")
        #expect(sender.sent.count == 1, "not tried again before the interval")
        clock.advance(by: .seconds(1))
        let reports = try #require(await delivery.reports.value(within: .seconds(60), on: SystemDeliveryClock()))
        #expect(reports.map(\.status) == [.accepted])
        #expect(sender.sent.count == 2)
        #expect(engine.parked == 0)
        #expect(spool.files.withLockedValue { $0.isEmpty })
    }
}

/// A stop drains: deliveries under way get `drainGrace` (on the clock) to settle, the rest is stopped and written to
/// the spool with only the routes still due, and only then does the engine's service return.
@Test func aStopGivesTheGraceThenSpoolsWhatIsStillDueThenEnds() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool()
    let sender = ScriptedSender([nil, ScriptedSender.unavailable(retryAfter: .seconds(600))])  // route a accepted, b waits
    var settings = EngineSettings()
    settings.drainGrace = .seconds(10)
    let engine = DeliveryEngine(settings: settings, spool: spool, metrics: noMetrics, clock: clock, logger: logger, replan: { _ in nil })
    let group = ServiceGroup(services: [engine], gracefulShutdownSignals: [], logger: logger)
    async let running: Void = group.run()
    guard case .pending(let delivery, _) = await engine.deliver(record(3), plan: plan(sender, routes: ["a", "b"]), wait: .seconds(5), logger: logger)
    else {
        Issue.record("expected route b to wait to retry")
        return
    }
    guard case .spooled = try engine.acknowledge(delivery) else {
        Issue.record("expected it spooled for its 202")
        return
    }
    await clock.waitForPending { $0.contains(.seconds(600)) }
    // The two pings race for the scripted answers: one is accepted, the other waits. The accepted one is written as
    // progress at once, so a crash or a hand-over does not send it again; "at once" is its own acceptance, which may
    // come after the other's retry answered the sender: wait for that write itself.
    try await eventually("the accepted route is written to the spool as done") {
        spool.files.withLockedValue { $0.values.first?.done?.count == 1 }
    }
    let done = spool.files.withLockedValue { $0.values.first?.done } ?? []
    #expect(done == ["a"] || done == ["b"])
    let waiting = done == ["a"] ? "b" : "a"
    await group.triggerGracefulShutdown()
    await clock.waitForPending { $0.contains(.seconds(10)) }
    #expect(spool.files.withLockedValue { $0.values.first?.routes } == nil, "nothing handed over during the grace")
    clock.advance(by: .seconds(10))
    try await running
    #expect(spool.files.withLockedValue { Array($0.values) }.map(\.routes) == [[waiting]])
    #expect(sender.sent.count == 2, "no attempt after the stop")
    guard case .stopping = await engine.deliver(record(4), plan: plan(sender), wait: .zero, logger: logger) else {
        Issue.record("a stopped engine must start nothing")
        return
    }
}

/// On start the engine replays the spool under the configuration in force, sending only the routes still due.
@Test func theSpoolIsReplayedOnStartWithOnlyTheRoutesStillDue() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool(files: [record(5, routes: ["b"])])
    let sender = ScriptedSender()
    try await withRunningEngine(spool: spool, clock: clock, replan: { _ in plan(sender, routes: ["a", "b"]) }) { engine, _ in
        try await eventually("the spooled event is delivered and its file removed") { spool.files.withLockedValue { $0.isEmpty } }
        #expect(sender.sent.count == 1)
        #expect(sender.sent.first?.contains("t-b") == true)
        #expect(engine.history.list(.init()).map(\.origin) == [.spool])
    }
}

/// A fence that answers as told, and counts its questions.
private final class ToggledFence: DeliveryFence {
    let refusing = NIOLockedValueBox(false)
    let asked = NIOLockedValueBox(0)
    /// Refuses once it has answered this many times (nil: as `refusing` says).
    let refuseAfter = NIOLockedValueBox<Int?>(nil)

    func refusal(project: String) async -> String? {
        let count = asked.withLockedValue { asked in
            asked += 1
            return asked
        }
        let turned = refuseAfter.withLockedValue { $0 }.map { count > $0 } ?? false
        return refusing.withLockedValue { $0 } || turned ? "another replica delivers \(project) now" : nil
    }
}

/// The fence the engine is built with is asked before every attempt of an event's delivery, and again by the sender
/// right before the request leaves; a refusal sends nothing, and the engine stands the project's deliveries down by
/// itself: what is still due goes back to the spool.
@Test func aFenceThatRefusesStandsTheProjectDownBeforeAnyRequest() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool()
    let fence = ToggledFence()
    let sender = ScriptedSender([nil, ScriptedSender.unavailable(retryAfter: .seconds(600))])  // one route accepted, one waits
    let engine = DeliveryEngine(
        settings: EngineSettings(), spool: spool, metrics: noMetrics, clock: clock, logger: logger, fence: fence, replan: { _ in nil })
    let group = ServiceGroup(services: [engine], gracefulShutdownSignals: [], logger: logger)
    async let running: Void = group.run()
    guard case .pending(let delivery, _) = await engine.deliver(record(3), plan: plan(sender, routes: ["a", "b"]), wait: .seconds(5), logger: logger)
    else {
        Issue.record("expected one route to wait to retry")
        return
    }
    guard case .spooled = try engine.acknowledge(delivery) else {
        Issue.record("expected it spooled for its 202")
        return
    }
    // Twice per request: before its turn, and by the sender right before it leaves (credentials in hand).
    #expect(fence.asked.withLockedValue { $0 } == 4, "asked twice for each of the two first attempts")
    await clock.waitForPending { $0.contains(.seconds(600)) }
    // The accepted route's progress is written at its own acceptance, which may follow the other's retry: wait for it.
    try await eventually("the accepted route is written to the spool as done") {
        spool.files.withLockedValue { $0.values.first?.done?.count == 1 }
    }
    let waiting = spool.files.withLockedValue { $0.values.first?.done } == ["a"] ? "b" : "a"
    fence.refusing.withLockedValue { $0 = true }
    clock.advance(by: .seconds(600))
    try await eventually("the refused ping is handed back to the spool, still due") {
        spool.files.withLockedValue { Array($0.values) }.map(\.routes) == [[waiting]]
    }
    #expect(fence.asked.withLockedValue { $0 } == 5, "the first ask of the third attempt refused")
    #expect(sender.sent.count == 2, "no request after the refusal")
    // The two routes' first attempts run at once, so either may be the accepted one: the waiting route's entry.
    try await eventually("the refused ping's history entry says interrupted") {
        engine.history.list(.init()).first { $0.route == waiting }?.report?.status == .interrupted
    }
    // An operator's send is not an event's delivery: it is not fenced.
    let sent = await engine.send(
        [ping("c")], batch: DeliveryBatch(version: record(4).version, eventID: nil, origin: .send, receivedAt: Date()),
        plan: SendPlan(sender: sender, policy: RetryPolicy()), logger: logger)
    #expect(sent.map(\.status) == [.accepted])
    await group.triggerGracefulShutdown()
    try await running
}

/// Issue #50: a fence that turns while the sender waits for its credentials (a token exchange can take
/// `fcm.timeoutSeconds`) is asked again right before the request leaves: nothing is sent, and the ping is handed back
/// as the first refusal hands it back.
@Test func aFenceThatTurnsWhileTheSenderWaitsSendsNothing() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool()
    let fence = ToggledFence()
    let sender = ScriptedSender([nil])
    // The fence turns after its first answer (before the turn), so the sender's ask (credentials in hand) refuses.
    fence.refuseAfter.withLockedValue { $0 = 1 }
    let engine = DeliveryEngine(
        settings: EngineSettings(), spool: spool, metrics: noMetrics, clock: clock, logger: logger, fence: fence, replan: { _ in nil })
    let group = ServiceGroup(services: [engine], gracefulShutdownSignals: [], logger: logger)
    async let running: Void = group.run()
    _ = await engine.deliver(record(3), plan: plan(sender, routes: ["a"]), wait: .seconds(5), logger: logger)
    #expect(sender.sent.isEmpty, "no request left")
    #expect(fence.asked.withLockedValue { $0 } == 2)
    try await eventually("the ping's history entry says interrupted") {
        engine.history.list(.init()).first?.report?.status == .interrupted
    }
    await group.triggerGracefulShutdown()
    try await running
}

/// Holds its first answer until told, then lets the ping go.
private final class HeldFence: DeliveryFence {
    let asked = NIOLockedValueBox(0)
    let (entered, enter) = AsyncStream.makeStream(of: Void.self)
    let (released, release) = AsyncStream.makeStream(of: Void.self)

    func refusal(project: String) async -> String? {
        let count = asked.withLockedValue { asked in
            asked += 1
            return asked
        }
        if count == 1 {
            enter.yield()
            for await _ in released { break }
        }
        return nil
    }
}

/// The fault campaign's seed 60601 (a 60-minute run): a shard's ping waited on the fence's database check through a
/// PostgreSQL stall; meanwhile its delivery was stood down and handed back to the outbox; the check then said yes, the
/// ping went, and the outbox's delivery of the same event sent it again. A ping whose delivery was stood down while it
/// waited for the fence sends nothing.
@Test func aPingWaitingOnTheFenceWhenItsDeliveryIsStoodDownSendsNothing() async throws {
    let clock = ManualDeliveryClock()
    let fence = HeldFence()
    let sender = ScriptedSender([nil])
    let engine = DeliveryEngine(
        settings: EngineSettings(), spool: RecordingSpool(), metrics: noMetrics, clock: clock, logger: logger, fence: fence,
        replan: { _ in nil })
    let group = ServiceGroup(services: [engine], gracefulShutdownSignals: [], logger: logger)
    async let running: Void = group.run()
    async let outcome = engine.deliver(record(3), plan: plan(sender, routes: ["a"]), wait: .seconds(5), logger: logger)
    var entered = fence.entered.makeAsyncIterator()
    await entered.next()
    #expect(engine.standDown(project: "p") == 1)
    fence.release.yield()
    _ = await outcome
    #expect(sender.sent.isEmpty, "no request after the stand-down")
    try await eventually("the ping's history entry says interrupted") {
        engine.history.list(.init()).first?.report?.status == .interrupted
    }
    await group.triggerGracefulShutdown()
    try await running
}
