import DeliveryEngine
import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import RelayServer

/// The admin token throttle (issue #48) on a clock the test moves: wrong tokens put the client's next turn later,
/// whether they come one at a time or all at once; a right token is always checked, and accepted, within 8 s at most;
/// each attempt ends its own turn. Time moves only when every attempt under way has either finished or waits on a
/// timer, and then to the soonest timer: decided by events, not by the wall clock.
struct GuessThrottleTests {
    /// A manual clock that also says when a timer is set, so the harness knows when every attempt has settled.
    final class SignallingClock: DeliveryClock {
        let manual = ManualDeliveryClock()
        /// Told of each timer set (a run's own stream: a stream ends with its first loop).
        let listener = NIOLockedValueBox<AsyncStream<Void>.Continuation?>(nil)

        func now() -> Date { manual.now() }
        func instant() -> Duration { manual.instant() }
        func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> DeliveryTimer {
            defer { listener.withLockedValue { _ = $0?.yield() } }
            return manual.schedule(after: delay, action)
        }
        func cancel(_ timer: DeliveryTimer) { manual.cancel(timer) }
    }

    let clock = SignallingClock()
    let throttle: GuessThrottle

    init() { throttle = GuessThrottle(clock: clock) }

    /// `attempts` (each right or wrong) from `client`, all sent at once; each one's outcome, in order.
    func run(_ client: String, _ attempts: [Bool]) async -> [GuessThrottle.Outcome] {
        let outcomes = NIOLockedValueBox([Int: GuessThrottle.Outcome]())
        let (events, signal) = AsyncStream<Void>.makeStream()
        clock.listener.withLockedValue { $0 = signal }
        return await withTaskGroup(of: Void.self) { group in
            for (index, right) in attempts.enumerated() {
                group.addTask { [throttle] in
                    let outcome = await throttle.attempt(from: client) { right }
                    outcomes.withLockedValue { $0[index] = outcome }
                    signal.yield()
                }
            }
            for await _ in events {
                let finished = outcomes.withLockedValue { $0.count }
                if finished == attempts.count { break }
                // Everything under way waits on a timer: time moves to the soonest.
                if finished + clock.manual.pending == attempts.count, let soonest = clock.manual.pendingDelays.first {
                    clock.manual.advance(by: soonest)
                }
            }
            return outcomes.withLockedValue { outcomes in attempts.indices.map { outcomes[$0]! } }
        }
    }

    /// Attempts one after another, each sent as soon as the previous one was answered.
    func oneByOne(_ client: String, _ attempts: [Bool]) async -> [GuessThrottle.Outcome] {
        var outcomes: [GuessThrottle.Outcome] = []
        for right in attempts { outcomes += await run(client, [right]) }
        return outcomes
    }

    @Test func oneAtATimeEachWrongTokenDoublesTheWaitUpTo8Seconds() async {
        let outcomes = await oneByOne("10.0.0.1", Array(repeating: false, count: 8))
        #expect(outcomes.allSatisfy { !$0.accepted })
        #expect(
            outcomes.map(\.waited) == [
                .zero, .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8),
            ])
        #expect(throttle.failures(of: "10.0.0.1") == 8)
        // Another client is not held up.
        #expect(await run("10.0.0.2", [false]) == [.init(accepted: false, waited: .zero)])
        // Forgotten after the window.
        clock.manual.advance(by: GuessThrottle.window)
        #expect(throttle.failures(of: "10.0.0.1") == 0)
        #expect(await run("10.0.0.1", [true]) == [.init(accepted: true, waited: .zero)])
    }

    @Test func aCleanClientsRightTokensInParallelAreNeverHeldUp() async {
        let outcomes = await run("192.0.2.9", Array(repeating: true, count: 50))
        #expect(outcomes.allSatisfy { $0 == .init(accepted: true, waited: .zero) })
        #expect(clock.manual.pending == 0)
    }

    @Test func aParallelBurstOfWrongTokensIsCountedAndSpacedAsIfSentOneByOne() async {
        let outcomes = await run("198.51.100.7", Array(repeating: false, count: 6))
        #expect(outcomes.allSatisfy { !$0.accepted })
        #expect(throttle.failures(of: "198.51.100.7") == 6)
        // One checked at once, then turns 0.25, 0.5, 1, 2 and 4 s apart.
        #expect(
            outcomes.map(\.waited).sorted()
                == [.zero, .milliseconds(250), .milliseconds(750), .milliseconds(1750), .milliseconds(3750), .milliseconds(7750)])
    }

    @Test func aRightTokenIsCheckedAndAcceptedWithin8SecondsWhateverItsAddressSends() async {
        // A guesser behind the same address: ten wrong tokens on record, then 40 more at once with the owner's right one.
        _ = await oneByOne("203.0.113.5", Array(repeating: false, count: 10))
        let outcomes = await run("203.0.113.5", Array(repeating: false, count: 40) + [true])
        let owner = outcomes.last!
        #expect(owner.accepted, "the right token is checked and accepted, not refused unchecked")
        #expect(owner.waited <= GuessThrottle.maximumDelay)
        #expect(outcomes.dropLast().allSatisfy { !$0.accepted && $0.waited <= GuessThrottle.maximumDelay })
        // Once the turns already given are over, a right token goes at once, and forgets the client's failures.
        clock.manual.advance(by: GuessThrottle.maximumDelay * 2)
        #expect(await run("203.0.113.5", [true]) == [.init(accepted: true, waited: .zero)])
        #expect(throttle.failures(of: "203.0.113.5") == 0)
    }

    @Test func eachAttemptEndsOnlyItsOwnTurn() async {
        // Two failures on record: the next turn is 0.5 s away.
        _ = await oneByOne("10.9.9.9", [false, false])
        // Three attempts at once: the first to finish must not let the others, or a later one, go unthrottled.
        let outcomes = await run("10.9.9.9", [false, false, false])
        #expect(outcomes.map(\.waited).sorted() == [.milliseconds(500), .milliseconds(1500), .milliseconds(3500)])
        let later = await run("10.9.9.9", [false])
        #expect(later[0].waited > .zero, "five failures on record: the next attempt waits its turn")
        #expect(throttle.failures(of: "10.9.9.9") == 6)
    }
}
