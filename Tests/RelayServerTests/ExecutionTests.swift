import Foundation
import NIOPosix
@testable import RelayServer
import Testing

/// A task that prefers the relay's executor runs on NIO's event loops, and stays there across awaits.
@Test func tasksThatPreferTheRelaysExecutorRunOnTheEventLoops() async {
    let onLoop = await Task(executorPreference: EventLoopExecutor.shared) { () -> [Bool] in
        var seen = [MultiThreadedEventLoopGroup.currentEventLoop != nil]
        try? await Task.sleep(for: .milliseconds(5))
        seen.append(MultiThreadedEventLoopGroup.currentEventLoop != nil)
        // A child task inherits the preference.
        async let child = MultiThreadedEventLoopGroup.currentEventLoop != nil
        seen.append(await child)
        return seen
    }.value
    #expect(onLoop == [true, true, true])
    let elsewhere = await Task.detached { MultiThreadedEventLoopGroup.currentEventLoop != nil }.value
    #expect(!elsewhere, "without the preference a task runs on Swift's own pool (the check would prove nothing)")
}

/// Every waiter gets the settled value; a waiter whose bound passes first gets nil, and a later settle is harmless.
@Test func settlementAnswersEveryWaiterOrTheirTimeout() async {
    let settlement = Settlement<Int>()
    #expect(await settlement.value(within: .zero) == nil)
    let early = await settlement.value(within: .milliseconds(20))
    #expect(early == nil)
    async let first = settlement.value(within: .seconds(10))
    async let second = settlement.value(within: .seconds(10))
    async let short = settlement.value(within: .milliseconds(10))
    try? await Task.sleep(for: .milliseconds(100))
    let began = ContinuousClock.now
    settlement.settle(7)
    settlement.settle(8)
    let answers = await [first, second, short]
    #expect(answers == [7, 7, nil])
    #expect(ContinuousClock.now - began < .seconds(5), "waiters are answered at the settle, not at their bound")
    #expect(await settlement.value(within: .zero) == 7)
}
