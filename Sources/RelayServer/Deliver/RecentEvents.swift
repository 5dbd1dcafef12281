import Foundation

/// Remembers recent events by their keys (event id, project and version), so a redelivery sends nothing twice.
///
/// A duplicate that arrives while the first is being delivered waits for it and gets the same reports. Only fully
/// accepted deliveries are remembered: after a failure, the sender's retry delivers again. Bounded by count and age.
actor RecentEvents {
    let window: TimeInterval
    let capacity: Int
    private var inFlight: [String: Task<[DeliveryReport], Never>] = [:]
    private var done: [String: (reports: [DeliveryReport], at: Date)] = [:]
    private var order: [String] = []

    init(window: Duration = .seconds(600), capacity: Int = 10_000) {
        self.window = Double(window.components.seconds)
        self.capacity = capacity
    }

    /// Runs `work` unless one of `keys` was seen recently; then returns what it returned then (`duplicate` true).
    func deliver(keys: [String], _ work: @escaping @Sendable () async -> [DeliveryReport]) async -> (reports: [DeliveryReport], duplicate: Bool) {
        forgetExpired()
        if let previous = keys.lazy.compactMap({ self.done[$0] }).first { return (previous.reports, true) }
        if let running = keys.lazy.compactMap({ self.inFlight[$0] }).first { return (await running.value, true) }
        let task = Task { await work() }
        for key in keys { inFlight[key] = task }
        let reports = await task.value
        for key in keys { inFlight[key] = nil }
        if reports.allSatisfy(\.succeeded) { for key in keys { remember(key, reports) } }
        return (reports, false)
    }

    private func remember(_ key: String, _ reports: [DeliveryReport]) {
        done[key] = (reports, Date())
        order.append(key)
        while order.count > capacity { done[order.removeFirst()] = nil }
    }

    private func forgetExpired() {
        let cutoff = Date().addingTimeInterval(-window)
        while let first = order.first, let entry = done[first], entry.at < cutoff {
            done[first] = nil
            order.removeFirst()
        }
    }
}
