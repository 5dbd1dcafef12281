import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The bounds of every ``Settlement`` wait, checked together: while anybody waits, one timer every `tick` ends the
/// waits whose deadline has passed. A timer per waiter, scheduled and then cancelled on an event loop from another
/// thread, woke that loop twice per webhook and measured 3.5 % of the relay's CPU; this costs a lock instead. A wait
/// ends at most one tick late.
///
/// A part the application builds once (inside its ``SystemDeliveryClock``) and hands to whoever waits: the engine, the
/// store, the probes.
public final class WaitDeadlines: Sendable {
    private struct Entry {
        let deadline: NIODeadline
        let expire: @Sendable () -> Void
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextID = 0
        var ticking = false
    }

    private let state = NIOLockedValueBox(State())
    private let tick: TimeAmount
    private let loop: any EventLoop

    public init(tick: TimeAmount = .milliseconds(10), loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()) {
        self.tick = tick
        self.loop = loop
    }

    /// Calls `expire` once, after `deadline`, unless ``cancel(_:)`` comes first; returns the id to cancel with.
    func add(_ deadline: NIODeadline, expire: @escaping @Sendable () -> Void) -> Int {
        let (id, start) = state.withLockedValue { state in
            defer { state.nextID += 1 }
            state.entries[state.nextID] = Entry(deadline: deadline, expire: expire)
            let start = !state.ticking
            state.ticking = true
            return (state.nextID, start)
        }
        if start { schedule() }
        return id
    }

    func cancel(_ id: Int) {
        state.withLockedValue { _ = $0.entries.removeValue(forKey: id) }
    }

    /// How many waits are being timed now.
    var count: Int { state.withLockedValue { $0.entries.count } }

    /// Whether the timer is running (it stops when nobody waits).
    var isTicking: Bool { state.withLockedValue { $0.ticking } }

    private func schedule() {
        loop.scheduleTask(in: tick) { self.sweep() }
    }

    private func sweep() {
        let now = NIODeadline.now()
        let (expired, more) = state.withLockedValue { state -> ([@Sendable () -> Void], Bool) in
            let due = state.entries.filter { $0.value.deadline <= now }
            for id in due.keys { state.entries[id] = nil }
            state.ticking = !state.entries.isEmpty  // the timer stops when nobody waits
            return (due.values.map(\.expire), state.ticking)
        }
        for expire in expired { expire() }
        if more { schedule() }
    }
}
