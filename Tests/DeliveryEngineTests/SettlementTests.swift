import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import Testing

@testable import DeliveryEngine

/// Every waiter gets the settled value when it settles; a waiter whose bound passes first gets nil, and a later
/// settle is harmless. The bounds are on a clock the test moves: a settle that left its waiters to their bound would
/// have them answer nil, and one that answered no one fails at the poll's limit instead of hanging the run.
@Test func settlementAnswersEveryWaiterOrTheirTimeout() async throws {
    let clock = ManualDeliveryClock()
    let settlement = Settlement<Int>()
    #expect(await settlement.value(within: .zero, on: clock) == nil)
    async let early = settlement.value(within: .milliseconds(20), on: clock)
    try await poll { clock.pending == 1 }
    clock.advance(by: .milliseconds(19))
    #expect(settlement.waiting == 1, "not before its bound")
    clock.advance(by: .milliseconds(1))
    #expect(await early == nil)
    #expect(settlement.waiting == 0, "a waiter whose bound passed is forgotten")
    let answers = Answers<Int?>()
    for _ in 0..<2 {
        Task {
            let answer = await settlement.value(within: .seconds(120), on: clock)
            answers.list.withLockedValue { $0.append(answer) }
        }
    }
    try await poll { settlement.waiting == 2 }
    settlement.settle(7)
    settlement.settle(8)
    try await poll { answers.list.withLockedValue { $0.count } == 2 }
    #expect(answers.list.withLockedValue { $0 } == [7, 7])
    #expect(settlement.waiting == 0)
    #expect(clock.pending == 0, "a settled waiter's bound is cancelled")
    #expect(await settlement.value(within: .zero, on: clock) == 7)
}

/// The shared deadline sweep ends each wait once, at the first tick after its deadline; a cancelled wait never ends;
/// the timer stops when nobody waits and starts again for the next waiter. An embedded event loop runs the ticks, so
/// no clock decides the outcome.
@Test func waitDeadlinesExpireOnceAndOnlyWhenDue() {
    let loop = EmbeddedEventLoop()
    let deadlines = WaitDeadlines(tick: .milliseconds(10), loop: loop)
    let expired = Answers<String>()
    let far = deadlines.add(.now() + .seconds(600)) { expired.list.withLockedValue { $0.append("far") } }
    let cancelled = deadlines.add(.now()) { expired.list.withLockedValue { $0.append("cancelled") } }
    deadlines.cancel(cancelled)
    _ = deadlines.add(.now()) { expired.list.withLockedValue { $0.append("due") } }
    #expect(expired.list.withLockedValue { $0 }.isEmpty, "nothing ends before a tick")
    loop.advanceTime(by: .milliseconds(10))
    #expect(expired.list.withLockedValue { $0 } == ["due"])
    #expect(deadlines.count == 1 && deadlines.isTicking, "the far wait is still timed")
    deadlines.cancel(far)
    loop.advanceTime(by: .milliseconds(10))
    #expect(!deadlines.isTicking, "the timer stops when nobody waits")
    _ = deadlines.add(.now()) { expired.list.withLockedValue { $0.append("again") } }
    #expect(deadlines.isTicking)
    loop.advanceTime(by: .milliseconds(30))
    #expect(expired.list.withLockedValue { $0 } == ["due", "again"], "each wait ends once")
    #expect(deadlines.count == 0 && !deadlines.isTicking)
}

/// Issue #52: a far wait alone sets one sweep, for its deadline, not one every tick (an idle replica's renewal always
/// waits, and the tick woke it a hundred times a second); an earlier wait that comes meanwhile sets one of its own.
@Test func aFarWaitSetsOneSweepNotOneATick() {
    let loop = EmbeddedEventLoop()
    let deadlines = WaitDeadlines(tick: .milliseconds(10), loop: loop)
    let expired = Answers<String>()
    _ = deadlines.add(.now() + .seconds(600)) { expired.list.withLockedValue { $0.append("far") } }
    loop.advanceTime(by: .seconds(5))
    #expect(deadlines.sweepsSet == 1, "five seconds of a far wait set \(deadlines.sweepsSet) sweeps")
    _ = deadlines.add(.now()) { expired.list.withLockedValue { $0.append("near") } }
    #expect(deadlines.sweepsSet == 2)
    loop.advanceTime(by: .milliseconds(10))
    #expect(expired.list.withLockedValue { $0 } == ["near"])
    #expect(deadlines.isTicking, "the far wait is still timed")
}

/// Waits up to a minute for `condition`, so that a broken settlement fails the test instead of hanging the run.
private func poll(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    for _ in 0..<6000 {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("the condition did not hold within a minute", sourceLocation: sourceLocation)
}

private final class Answers<T: Sendable>: Sendable {
    let list = NIOLockedValueBox<[T]>([])
}
