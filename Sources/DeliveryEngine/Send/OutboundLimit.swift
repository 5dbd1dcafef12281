import NIOConcurrencyHelpers

/// At most `limit` requests at once across all pings, so a fan-out to many routes cannot hammer a destination.
///
/// A counting semaphore: a free slot is taken without suspending (the common case costs one lock, not an actor hop);
/// when none is free the caller waits in line, and a released slot passes straight to the first in line.
package final class OutboundLimit: Sendable {
    let limit: Int
    private let state: NIOLockedValueBox<State>

    private struct State {
        var inUse = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
        var first = 0
    }

    package init(limit: Int) {
        self.limit = max(1, limit)
        self.state = NIOLockedValueBox(State())
    }

    /// Runs `work` once a slot is free.
    package func run<T: Sendable>(_ work: @Sendable () async -> T) async -> T {
        await acquire()
        defer { release() }
        return await work()
    }

    private func acquire() async {
        let taken = state.withLockedValue { state in
            guard state.inUse < limit else { return false }
            state.inUse += 1
            return true
        }
        guard !taken else { return }
        await withCheckedContinuation { continuation in
            let now = state.withLockedValue { state in
                // A slot may have come free between the two locks.
                guard state.inUse < limit else {
                    state.waiting.append(continuation)
                    return false
                }
                state.inUse += 1
                return true
            }
            if now { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard state.first < state.waiting.count else {
                state.inUse -= 1
                return nil
            }
            let next = state.waiting[state.first]
            state.first += 1
            if state.first == state.waiting.count {
                state.waiting.removeAll(keepingCapacity: true)
                state.first = 0
            }
            return next  // the slot passes straight to it: `inUse` stays
        }
        next?.resume()
    }
}
