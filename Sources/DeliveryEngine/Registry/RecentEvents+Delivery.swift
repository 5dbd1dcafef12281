import Foundation
import NIOConcurrencyHelpers

/// One delivery's life: run, settled and remembered against duplicates for the window, or forgotten.
extension RecentEvents {
    // MARK: - The delivery

    func run(_ delivery: EventDelivery, _ work: Work) async {
        let control = delivery.control
        var due = delivery.record.routes.map(Set.init)
        var routes: [String] = []
        var latest: [String: DeliveryReport] = [:]
        var parked = false
        while true {
            for report in await work(due, control) {
                if latest[report.route] == nil { routes.append(report.route) }
                latest[report.route] = report
            }
            let unfinished = Set(routes.filter { latest[$0]?.unfinished == true }).subtracting(control.discarded)
            // An event nobody acknowledged is left to its sender's retry; an acknowledged one must not be lost.
            guard !unfinished.isEmpty, !control.isStopped, delivery.isOnDisk else { break }
            if !parked {
                parked = true
                delivery.disk.withLockedValue { $0.parked = true }
                state.withLockedValue { state in
                    state.parked += 1
                    parkedChanged(state.parked)
                }
            }
            delivery.news.settle(.retrying(after: parkedRetryInterval))
            _ = await control.pause(for: parkedRetryInterval)
            let next = unfinished.subtracting(control.discarded)
            guard !next.isEmpty, !control.isStopped else { break }
            due = next
        }
        let reports = routes.compactMap { latest[$0] }
        finish(delivery, reports, wasParked: parked)
    }

    /// A delivery that never ran (the engine was stopping): its keys are free again.
    func forget(_ delivery: EventDelivery) {
        state.withLockedValue { state in
            for key in delivery.record.keys where state.inFlight[key] === delivery { state.inFlight[key] = nil }
            state.inFlightCount -= 1
        }
    }

    func finish(_ delivery: EventDelivery, _ reports: [DeliveryReport], wasParked: Bool) {
        let control = delivery.control
        let due = reports.filter(\.unfinished).map(\.route).filter { !control.discarded.contains($0) }
        let handOver = delivery.disk.withLockedValue { disk -> HandOver in
            disk.settled = reports
            if due.isEmpty {
                if disk.onDisk { spool?.settle(delivery.record, reports: reports) }
                disk.onDisk = false
                disk.handOver = .settled
            } else if control.isStopped, let spool {
                // Stopped and ended: nothing of it runs any more, so the file says exactly what is still due.
                var record = delivery.record
                record.routes = due
                record.done = nil
                do {
                    try spool.write(record)
                    disk.onDisk = true
                    disk.handOver = .spooled(record)
                } catch {
                    disk.handOver = .lost(record)
                }
            } else {
                disk.handOver = disk.onDisk ? .spooled(delivery.record) : .lost(delivery.record)
            }
            return disk.handOver!
        }
        let now = clock.now()
        state.withLockedValue { state in
            for key in delivery.record.keys where state.inFlight[key] === delivery { state.inFlight[key] = nil }
            state.inFlightCount -= 1
            if wasParked {
                state.parked -= 1
                parkedChanged(state.parked)
            }
            // Dead or interrupted deliveries are not remembered, so the sender's retry (or the next start) delivers.
            if due.isEmpty { remember(delivery.record, reports, at: now, in: &state) }
        }
        if case .spooled = handOver, control.isStopped { delivery.news.settle(.handedOver) }
        delivery.news.settle(.settled(reports))
        delivery.reports.settle(reports)
    }

    func remember(_ record: EventRecord, _ reports: [DeliveryReport], at now: Date, in state: inout State) {
        guard capacity > 0 else { return }
        let remembered = Remembered(fingerprint: record.fingerprint, reports: reports, at: now)
        for key in record.keys { state.done[key] = remembered }
        state.order.append((record.keys, now))
        while state.order.count - state.head > capacity { forgetOldest(&state) }
    }

    func forgetExpired(_ state: inout State, now: Date) {
        let cutoff = now.addingTimeInterval(-window)
        while state.head < state.order.count, state.order[state.head].at < cutoff { forgetOldest(&state) }
    }

    func forgetOldest(_ state: inout State) {
        // A key remembered again since has a newer time: that entry stays.
        let (keys, at) = state.order[state.head]
        for key in keys {
            // Found once, removed by its index: each lookup hashes the key again.
            if let index = state.done.index(forKey: key), state.done[index].value.at == at { state.done.remove(at: index) }
        }
        state.head += 1
        if state.head * 2 >= state.order.count {
            state.order.removeFirst(state.head)
            state.head = 0
        }
    }
}
