import NIOConcurrencyHelpers

/// Paces one project's requests: at most `rate` a second on average, in bursts of at most `burst` (at the full
/// rate; a burst is `burst / rate` seconds' worth of slots), so a storm of
/// publishes (or a fan-out to many routes) never floods its destination. A spent quota (a 429) halves the pace for the whole project, not
/// only for the ping that got it, and the pace then climbs back to `rate` evenly over `recovery` without a 429.
///
/// Virtual scheduling: each request is given the next free slot, `1 / pace` after the previous one; a request whose
/// slot is now or past goes at once, any other waits until its slot. Taking a slot is one lock.
package final class Pacer: Sendable {
    package let rate: Double
    package let burst: Double
    package let recovery: Duration
    private let clock: any DeliveryClock
    private let state = NIOLockedValueBox(State())

    private struct State {
        /// When the next request may go, in the clock's instants (seconds).
        var next = -Double.infinity
        /// The pace right after the last 429, and when that was.
        var cut: (pace: Double, at: Double)?
    }

    /// The lowest pace a run of 429s can bring it to: one request a second.
    package static let floor = 1.0

    package init(rate: Double, burst: Double? = nil, recovery: Duration = .seconds(60), clock: any DeliveryClock) {
        self.rate = max(Self.floor, rate)
        self.burst = max(1, burst ?? rate)
        self.recovery = recovery
        self.clock = clock
    }

    /// Takes this request's slot: how long to wait before sending (zero: at once). The caller waits (so a stop can cut
    /// the wait short, as it cuts a retry's).
    package func reserve() -> Duration {
        let wait = state.withLockedValue { state -> Double in
            let now = Self.seconds(clock.instant())
            let interval = 1 / pace(state, now: now)
            // An idle pacer has a burst's worth of slots ready at once (`burst` at the full rate, fewer while the pace
            // is cut: the burst is a span of time); older unused slots are not saved up.
            let slot = max(state.next, now - burst / rate + interval)
            state.next = slot + interval
            return slot - now
        }
        // Under a microsecond is rounding, not a wait.
        return wait > 1e-6 ? .nanoseconds(Int64((wait * 1e9).rounded(.up))) : .zero
    }

    /// The destination's quota is spent (a 429): halve the project's pace from what it is now.
    package func throttled() {
        state.withLockedValue { state in
            let now = Self.seconds(clock.instant())
            state.cut = (max(Self.floor, pace(state, now: now) / 2), now)
        }
    }

    /// The pace now, in requests a second.
    package var current: Double { state.withLockedValue { pace($0, now: Self.seconds(clock.instant())) } }

    private func pace(_ state: State, now: Double) -> Double {
        guard let cut = state.cut else { return rate }
        let recovered = (now - cut.at) / Self.seconds(recovery)
        return recovered >= 1 ? rate : cut.pace + (rate - cut.pace) * max(0, recovered)
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// One ``Pacer`` per project, and per HTTP target's host, kept across reloads.
package final class Pacers: Sendable {
    private let pacers = NIOLockedValueBox([String: Pacer]())
    package let rate: Double
    private let clock: any DeliveryClock

    package init(rate: Double, clock: any DeliveryClock) { (self.rate, self.clock) = (rate, clock) }

    /// Every project that has sent, by name.
    package var all: [(project: String, pacer: Pacer)] {
        pacers.withLockedValue { $0.map { ($0.key, $0.value) } }.sorted { $0.project < $1.project }
    }

    package func pacer(for project: String) -> Pacer { pacer(for: project, rate: rate) }

    /// The pacer of a destination of its own (an HTTP target's host, keyed `host:<name>`), at its own rate; the first
    /// rate asked for a key is its rate until the process restarts.
    package func pacer(for key: String, rate: Double) -> Pacer {
        pacers.withLockedValue { pacers in
            if let pacer = pacers[key] { return pacer }
            let pacer = Pacer(rate: rate, clock: clock)
            pacers[key] = pacer
            return pacer
        }
    }
}
