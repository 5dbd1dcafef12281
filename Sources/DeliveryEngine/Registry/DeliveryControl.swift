import NIOConcurrencyHelpers

/// How one delivery is steered from outside while it runs: told of its first retry (so the waiting sender is answered
/// at once), paused between attempts, stopped at shutdown, and told which routes an operator discarded.
///
/// A pause is a wait on a ``Settlement`` with a bound, not a task sleep, so `stop` and `discard` end it at once and
/// the delivery hands over exactly: no attempt starts after `stop`, and one already under way finishes first.
final class DeliveryControl: Sendable {
    private struct State {
        var stopped = false
        var discarded: Set<String> = []
        var wakers: [Settlement<Bool>] = []
    }
    private let state = NIOLockedValueBox(State())
    /// Called before each wait to retry, with the wait.
    let onRetry: @Sendable (Duration) -> Void
    /// Called when its destination accepted one of several pings of the event (a waved route's shard, or any ping while others are
    /// due), with its name: the spool records it, so a hand-over or a crash does not send it again.
    let onAccepted: @Sendable (String) -> Void
    /// What pauses are measured on.
    let clock: any DeliveryClock

    init(
        clock: any DeliveryClock, onRetry: @escaping @Sendable (Duration) -> Void = { _ in },
        onAccepted: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.clock = clock
        self.onRetry = onRetry
        self.onAccepted = onAccepted
    }

    /// No attempt starts after this.
    var isStopped: Bool { state.withLockedValue { $0.stopped } }
    var discarded: Set<String> { state.withLockedValue { $0.discarded } }

    /// Waits `duration`, or less if stopped or woken meanwhile; true when it ended early.
    func pause(for duration: Duration) async -> Bool {
        let waker = Settlement<Bool>()
        let stopped = state.withLockedValue { state in
            if !state.stopped { state.wakers.append(waker) }
            return state.stopped
        }
        if stopped { return true }
        let woken = await waker.value(within: duration, on: clock) != nil
        state.withLockedValue { $0.wakers.removeAll { $0 === waker } }
        return woken
    }

    /// Stops the delivery: pauses end, no further attempt starts.
    func stop() { wake { $0.stopped = true } }

    /// An operator gave up on the route's ping: it is not tried again.
    func discard(_ route: String) { wake { _ = $0.discarded.insert(route) } }

    private func wake(_ change: (inout State) -> Void) {
        let wakers = state.withLockedValue { state in
            change(&state)
            defer { state.wakers = [] }
            return state.wakers
        }
        for waker in wakers { waker.settle(true) }
    }
}
