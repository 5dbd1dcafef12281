import Foundation

/// The deliveries under way and those settled recently, by their keys (event id, project and version).
///
/// A duplicate joins the delivery under way, or gets the answer of one settled in the last `window`. Deliveries run on
/// after the webhook is answered; each removes its spool file when it settles. Dead deliveries (retries ran out) are
/// not remembered, so the sender's retry delivers again.
actor RecentEvents {
    /// What a caller learns within its wait.
    enum Outcome: Sendable {
        case settled([DeliveryReport], duplicate: Bool)
        case pending
    }

    let window: TimeInterval
    let capacity: Int
    let spool: (any Spool)?
    private var inFlight: [String: (reports: Settlement<[DeliveryReport]>, record: SpoolRecord)] = [:]
    private var done: [String: (reports: [DeliveryReport], at: Date)] = [:]
    /// Keys oldest first from `head` on; the forgotten prefix is dropped in one go once it is half the array, so
    /// forgetting is O(1) (an array's `removeFirst` moves every key, on every event once the window is full).
    private var order: [(key: String, at: Date)] = []
    private var head = 0

    init(window: Duration = .seconds(600), capacity: Int = 10_000, spool: (any Spool)? = nil) {
        self.window = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
        self.capacity = capacity
        self.spool = spool
    }

    /// Starts the delivery (or joins the one under way) and waits up to `wait` for it to settle.
    func deliver(_ record: SpoolRecord, wait: Duration, _ work: @escaping @Sendable () async -> [DeliveryReport]) async -> Outcome {
        forgetExpired()
        if let previous = record.keys.lazy.compactMap({ self.done[$0] }).first { return .settled(previous.reports, duplicate: true) }
        let settlement: Settlement<[DeliveryReport]>
        let duplicate: Bool
        if let running = record.keys.lazy.compactMap({ self.inFlight[$0] }).first {
            (settlement, duplicate) = (running.reports, true)
        } else {
            settlement = Settlement()
            // Unstructured on purpose: the delivery outlives the request that started it; `drain` waits for it on stop.
            Task.detached {
                let reports = await work()
                await self.finish(record, reports)
                settlement.settle(reports)
            }
            for key in record.keys { inFlight[key] = (settlement, record) }
            duplicate = false
        }
        guard let reports = await settlement.value(within: wait) else { return .pending }
        return .settled(reports, duplicate: duplicate)
    }

    /// Writes a still-running delivery to the spool, before the sender is told 202.
    func spoolIfRunning(_ record: SpoolRecord) throws {
        guard let spool, inFlight[record.keys[0]] != nil else { return }
        try spool.write(record)
    }

    /// On stop: waits up to `grace` for deliveries under way; returns those still running.
    func drain(within grace: Duration) async -> [SpoolRecord] {
        var unique: [String: (reports: Settlement<[DeliveryReport]>, record: SpoolRecord)] = [:]
        for entry in inFlight.values { unique[entry.record.keys[0]] = entry }
        var left: [SpoolRecord] = []
        let deadline = ContinuousClock.now + grace
        for entry in unique.values where await entry.reports.value(within: deadline - .now) == nil {
            left.append(entry.record)
        }
        return left
    }

    private func finish(_ record: SpoolRecord, _ reports: [DeliveryReport]) {
        for key in record.keys { inFlight[key] = nil }
        spool?.remove(record)
        guard reports.allSatisfy({ $0.status != .dead }) else { return }
        for key in record.keys { remember(key, reports) }
    }

    private func remember(_ key: String, _ reports: [DeliveryReport]) {
        let now = Date()
        done[key] = (reports, now)
        order.append((key, now))
        while order.count - head > capacity { forgetOldest() }
    }

    private func forgetExpired() {
        let cutoff = Date().addingTimeInterval(-window)
        while head < order.count, order[head].at < cutoff { forgetOldest() }
    }

    private func forgetOldest() {
        // A key remembered again since has a newer time: that entry stays.
        let (key, at) = order[head]
        if done[key]?.at == at { done[key] = nil }
        head += 1
        if head * 2 >= order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
