import NIOConcurrencyHelpers

/// A value that a task settles once, and that any number of callers wait for with a bound while the task runs on.
///
/// A waiter costs one continuation and a callback on the ``DeliveryClock`` (an entry in ``WaitDeadlines`` on the real
/// one), not a task or a timer of its own: a webhook
/// that waits for its delivery is the hot path. (A task group would not do either: it waits for all its children, and
/// awaiting another task's value cannot be cancelled.)
package final class Settlement<T: Sendable>: Sendable {
    private struct Waiter {
        let continuation: CheckedContinuation<T?, Never>
        /// Its callback on the clock, once scheduled.
        var deadline: DeliveryTimer?
        let clock: any DeliveryClock
    }

    private struct State {
        var value: T?
        var waiters: [Int: Waiter] = [:]
        var nextID = 0
    }

    private let state = NIOLockedValueBox(State())

    /// Settles the value and answers everybody waiting; later calls change nothing.
    package init() {}

    package func settle(_ value: T) {
        let waiters = state.withLockedValue { state -> [Waiter] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters {
            if let deadline = waiter.deadline { waiter.clock.cancel(deadline) }
            waiter.continuation.resume(returning: value)
        }
    }

    /// The value if it is settled within `wait` on `clock`, else nil.
    package func value(within wait: Duration, on clock: any DeliveryClock) async -> T? {
        if let value = state.withLockedValue({ $0.value }) { return value }
        guard wait > .zero else { return nil }
        return await withCheckedContinuation { continuation in
            let id: Int? = state.withLockedValue { state in
                guard state.value == nil else { return nil }
                defer { state.nextID += 1 }
                state.waiters[state.nextID] = Waiter(continuation: continuation, clock: clock)
                return state.nextID
            }
            guard let id else {
                continuation.resume(returning: state.withLockedValue { $0.value })
                return
            }
            let deadline = clock.schedule(after: wait) { self.expire(id) }
            let waiting = state.withLockedValue { state in
                guard state.waiters[id] != nil else { return false }
                state.waiters[id]?.deadline = deadline
                return true
            }
            if !waiting { clock.cancel(deadline) }
        }
    }

    /// How many callers are waiting now.
    package var waiting: Int { state.withLockedValue { $0.waiters.count } }

    private func expire(_ id: Int) {
        state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.continuation.resume(returning: nil)
    }
}

extension DeliveryClock {
    /// Waits `duration` on this clock (a ``ManualDeliveryClock`` moves only when its test moves it), or until the
    /// task is cancelled.
    package func sleep(for duration: Duration) async {
        let cut = Settlement<Bool>()
        await withTaskCancellationHandler {
            _ = await cut.value(within: duration, on: self)
        } onCancel: {
            cut.settle(true)
        }
    }
}
