import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The bounds of every ``Settlement`` wait, checked together: one timer, set for the earliest deadline (at least a
/// `tick` away), ends the waits whose deadline has passed. A timer per waiter, scheduled and then cancelled on an event
/// loop from another thread, woke that loop twice per webhook and measured 3.5 % of the relay's CPU; this costs a lock
/// instead. A wait ends at most one tick late. Until issue #52 the timer ticked every `tick` while anybody waited, and a
/// relay with a loop that always waits for its next round woke a hundred times a second when idle.
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
        /// When the next sweep is set for, and its number; nil when none is.
        var scheduledAt: NIODeadline?
        var sweeps = 0
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
        let now = NIODeadline.now()
        let (id, next) = state.withLockedValue { state -> (Int, (NIODeadline, Int)?) in
            defer { state.nextID += 1 }
            state.entries[state.nextID] = Entry(deadline: deadline, expire: expire)
            return (state.nextID, Self.earlier(max(deadline, now + tick), in: &state))
        }
        if let (at, sweep) = next { schedule(at, sweep, now: now) }
        return id
    }

    func cancel(_ id: Int) {
        state.withLockedValue { _ = $0.entries.removeValue(forKey: id) }
    }

    /// How many waits are being timed now.
    var count: Int { state.withLockedValue { $0.entries.count } }

    /// How many sweeps were set so far (a test counts them: a far wait alone sets one, not one a tick).
    var sweepsSet: Int { state.withLockedValue { $0.sweeps } }

    /// Whether a sweep is set for somebody's wait (none is when nobody waits).
    var isTicking: Bool { state.withLockedValue { !$0.entries.isEmpty && $0.scheduledAt != nil } }

    /// A sweep at `at` (and its number) when that comes before the sweep set already (or none is), which it then
    /// becomes; nil otherwise.
    private static func earlier(_ at: NIODeadline, in state: inout State) -> (NIODeadline, Int)? {
        if let scheduled = state.scheduledAt, scheduled <= at { return nil }
        state.scheduledAt = at
        state.sweeps += 1
        return (at, state.sweeps)
    }

    /// On the loop's own time: a delay from now, so an embedded loop in a test runs it when it is advanced.
    private func schedule(_ at: NIODeadline, _ number: Int, now: NIODeadline) {
        loop.scheduleTask(in: max(at - now, .zero)) { self.sweep(number) }
    }

    private func sweep(_ number: Int) {
        let now = NIODeadline.now()
        let (expired, next) = state.withLockedValue { state -> ([@Sendable () -> Void], (NIODeadline, Int)?) in
            let due = state.entries.filter { $0.value.deadline <= now }
            for id in due.keys { state.entries[id] = nil }
            // The sweep set last is this one: none is set now. An older one (set for a wait since cancelled or ended,
            // then overtaken by an earlier one) leaves the one set after it standing.
            if number == state.sweeps { state.scheduledAt = nil }
            guard let earliest = state.entries.values.map(\.deadline).min() else {
                state.scheduledAt = nil
                return (due.values.map(\.expire), nil)
            }
            return (due.values.map(\.expire), Self.earlier(max(earliest, now + tick), in: &state))
        }
        for expire in expired { expire() }
        if let (at, sweep) = next { schedule(at, sweep, now: now) }
    }
}
