import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// The engine's only source of time: what time it is, and "call me back after a while". Retries, the answer's wait,
/// the dedup window, a parked event's next try and the drain all read it, so tests drive them with a
/// ``ManualDeliveryClock`` instead of sleeping.
public protocol DeliveryClock: Sendable {
    /// Wall-clock time: reports, the delivery history and the dedup window.
    func now() -> Date
    /// Monotonic time since an arbitrary origin: deadlines.
    func instant() -> Duration
    /// Calls `action` once, `delay` from now, unless ``cancel(_:)`` comes first.
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> DeliveryTimer
    func cancel(_ timer: DeliveryTimer)
}

/// A scheduled callback, to cancel it with.
public struct DeliveryTimer: Sendable, Hashable {
    let id: Int
}

/// The real clocks: `Date`, `ContinuousClock`, and a ``WaitDeadlines`` sweep for callbacks. Copies share the sweep: the
/// application builds one clock and hands it to every part that waits.
public struct SystemDeliveryClock: DeliveryClock {
    private static let origin = ContinuousClock.now
    let deadlines: WaitDeadlines

    public init(deadlines: WaitDeadlines = WaitDeadlines()) { self.deadlines = deadlines }

    public func now() -> Date { Date() }

    public func instant() -> Duration { ContinuousClock.now - Self.origin }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> DeliveryTimer {
        let (seconds, attoseconds) = delay.components
        return DeliveryTimer(
            id: deadlines.add(.now() + .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000), expire: action))
    }

    public func cancel(_ timer: DeliveryTimer) { deadlines.cancel(timer.id) }
}

/// Time that moves only when a test moves it. Callbacks due run inside ``advance(by:)``, in the order they fall due.
public final class ManualDeliveryClock: DeliveryClock {
    private struct State {
        var elapsed: Duration = .zero
        var timers: [Int: (due: Duration, action: @Sendable () -> Void)] = [:]
        var nextID = 0
        var released = false
        var watchers: [CheckedContinuation<Void, Never>] = []
    }

    private let start: Date
    private let state = NIOLockedValueBox(State())

    public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { self.start = start }

    public func now() -> Date {
        let elapsed = state.withLockedValue { $0.elapsed }
        return start.addingTimeInterval(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }

    public func instant() -> Duration { state.withLockedValue { $0.elapsed } }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> DeliveryTimer {
        let (timer, released, watchers) = state.withLockedValue { state in
            defer { state.nextID += 1 }
            state.timers[state.nextID] = (state.elapsed + max(delay, .zero), action)
            defer { state.watchers = [] }
            return (DeliveryTimer(id: state.nextID), state.released, state.watchers)
        }
        for watcher in watchers { watcher.resume() }
        if released { advance(by: max(delay, .zero)) }
        return timer
    }

    /// Returns once a callback is pending whose delay satisfies `condition`: the engine has begun to wait.
    public func waitForPending(_ condition: @escaping ([Duration]) -> Bool = { !$0.isEmpty }) async {
        while true {
            let met = condition(pendingDelays)
            if met { return }
            await withCheckedContinuation { continuation in
                let now = state.withLockedValue { state in
                    guard !condition(state.timers.values.map { $0.due - state.elapsed }.sorted()) else { return true }
                    state.watchers.append(continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        }
    }

    /// From now on time keeps up with every wait: what is pending runs now, and each later callback as it is
    /// scheduled. (A test's stop: the drain must not wait for time the test will not move.)
    public func release() {
        let pending = state.withLockedValue { state in
            state.released = true
            return state.timers.values.map { $0.due - state.elapsed }.max()
        }
        if let pending { advance(by: pending) }
    }

    public func cancel(_ timer: DeliveryTimer) { state.withLockedValue { _ = $0.timers.removeValue(forKey: timer.id) } }

    /// Callbacks scheduled and not yet run or cancelled: what the engine is waiting for.
    public var pending: Int { state.withLockedValue { $0.timers.count } }

    /// The delays still to run of the pending callbacks, soonest first.
    public var pendingDelays: [Duration] {
        state.withLockedValue { state in state.timers.values.map { $0.due - state.elapsed }.sorted() }
    }

    /// Moves time forward and runs every callback that falls due, soonest first.
    public func advance(by duration: Duration) {
        let target = state.withLockedValue { $0.elapsed + duration }
        while true {
            let next = state.withLockedValue { state -> (@Sendable () -> Void)? in
                guard
                    let (id, timer) = state.timers.filter({ $0.value.due <= target }).min(by: { $0.value.due < $1.value.due }).map({
                        ($0.key, $0.value)
                    })
                else {
                    state.elapsed = target
                    return nil
                }
                state.timers[id] = nil
                state.elapsed = max(state.elapsed, timer.due)
                return timer.action
            }
            guard let next else { return }
            next()
        }
    }
}
