import Foundation
import Synchronization

/// The deliveries under way and those settled recently, by their keys (event id, project and version).
///
/// A duplicate joins the delivery under way, or gets the answer of one settled in the last `window`. Deliveries run on
/// after the webhook is answered; each removes its spool file when it settles. Dead deliveries (retries ran out) are
/// not remembered, so the sender's retry delivers again.
///
/// State behind a lock, not an actor: every webhook looks up, starts and finishes a delivery here, and the actor hops
/// (contended under load) cost more than the dictionary work they guarded. Nothing awaits while holding the lock.
final class RecentEvents: Sendable {
    /// What a caller learns within its wait.
    enum Outcome: Sendable {
        case settled([DeliveryReport], duplicate: Bool)
        case pending
    }

    private typealias Running = (reports: Settlement<[DeliveryReport]>, record: SpoolRecord)

    private struct State {
        var inFlight: [String: Running] = [:]
        var done: [String: (reports: [DeliveryReport], at: Date)] = [:]
        /// Keys oldest first from `head` on; the forgotten prefix is dropped in one go once it is half the array, so
        /// forgetting is O(1) (an array's `removeFirst` moves every key, on every event once the window is full).
        var order: [(key: String, at: Date)] = []
        var head = 0
    }

    let window: TimeInterval
    let capacity: Int
    let spool: (any Spool)?
    private let state = Mutex(State())

    init(window: Duration = .seconds(600), capacity: Int = 10_000, spool: (any Spool)? = nil) {
        self.window = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
        self.capacity = capacity
        self.spool = spool
    }

    /// Starts the delivery (or joins the one under way) and waits up to `wait` for it to settle.
    func deliver(_ record: SpoolRecord, wait: Duration, _ work: @escaping @Sendable () async -> [DeliveryReport]) async -> Outcome {
        enum Found {
            case done([DeliveryReport])
            case running(Settlement<[DeliveryReport]>)
            case started(Settlement<[DeliveryReport]>)
        }
        let now = Date()
        let found = state.withLock { state -> Found in
            forgetExpired(&state, now: now)
            for key in record.keys {
                if let previous = state.done[key] { return .done(previous.reports) }
            }
            for key in record.keys {
                if let running = state.inFlight[key] { return .running(running.reports) }
            }
            let settlement = Settlement<[DeliveryReport]>()
            for key in record.keys { state.inFlight[key] = (settlement, record) }
            return .started(settlement)
        }
        let settlement: Settlement<[DeliveryReport]>
        let duplicate: Bool
        switch found {
        case .done(let reports):
            return .settled(reports, duplicate: true)
        case .running(let running):
            (settlement, duplicate) = (running, true)
        case .started(let started):
            (settlement, duplicate) = (started, false)
            // Unstructured on purpose: the delivery outlives the request that started it; `drain` waits for it on stop.
            Task.detached {
                let reports = await work()
                self.finish(record, reports)
                settlement.settle(reports)
            }
        }
        guard let reports = await settlement.value(within: wait) else { return .pending }
        return .settled(reports, duplicate: duplicate)
    }

    /// Writes a still-running delivery to the spool, before the sender is told 202. The write happens under the lock,
    /// so the delivery cannot finish (and remove its file) between the check and the write; it is the rare path.
    func spoolIfRunning(_ record: SpoolRecord) throws {
        guard let spool else { return }
        try state.withLock { state in
            guard state.inFlight[record.keys[0]] != nil else { return }
            try spool.write(record)
        }
    }

    /// On stop: waits up to `grace` for deliveries under way; returns those still running.
    func drain(within grace: Duration) async -> [SpoolRecord] {
        let running = state.withLock { state in
            var unique: [String: Running] = [:]
            for entry in state.inFlight.values { unique[entry.record.keys[0]] = entry }
            return Array(unique.values)
        }
        var left: [SpoolRecord] = []
        let deadline = ContinuousClock.now + grace
        for entry in running where await entry.reports.value(within: deadline - .now) == nil {
            left.append(entry.record)
        }
        return left
    }

    private func finish(_ record: SpoolRecord, _ reports: [DeliveryReport]) {
        let now = Date()
        state.withLock { state in
            for key in record.keys { state.inFlight[key] = nil }
            // Under the lock, so a 202's spool write cannot land after this removal.
            spool?.remove(record)
            guard reports.allSatisfy({ $0.status != .dead }) else { return }
            for key in record.keys { remember(key, reports, at: now, in: &state) }
        }
    }

    private func remember(_ key: String, _ reports: [DeliveryReport], at now: Date, in state: inout State) {
        state.done[key] = (reports, now)
        state.order.append((key, now))
        while state.order.count - state.head > capacity { forgetOldest(&state) }
    }

    private func forgetExpired(_ state: inout State, now: Date) {
        let cutoff = now.addingTimeInterval(-window)
        while state.head < state.order.count, state.order[state.head].at < cutoff { forgetOldest(&state) }
    }

    private func forgetOldest(_ state: inout State) {
        // A key remembered again since has a newer time: that entry stays.
        let (key, at) = state.order[state.head]
        if state.done[key]?.at == at { state.done[key] = nil }
        state.head += 1
        if state.head * 2 >= state.order.count {
            state.order.removeFirst(state.head)
            state.head = 0
        }
    }
}
