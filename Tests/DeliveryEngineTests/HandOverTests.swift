import Foundation
import RelayCore
import Testing

@testable import DeliveryEngine

// MARK: Tests

@Test func aHandOverWaitsForTheAttemptUnderWayAndSpoolsOnlyWhatIsStillDue() async throws {
    let spool = RecordingSpool()
    try await withRecentEvents(spool: spool) { recent in
        let attemptUnderWay = Settlement<Bool>()
        let attemptMayEnd = Settlement<Bool>()
        let outcome = await recent.deliver(record(1), wait: .zero) { _, control in
            // Route a is accepted; route b's attempt is under way when the stop comes, and fails.
            attemptUnderWay.settle(true)
            _ = await attemptMayEnd.value(within: .seconds(600), on: SystemDeliveryClock())
            return [report("a", .accepted), report("b", control.isStopped ? .interrupted : .dead)]
        }
        guard case .pending(let delivery, _) = outcome else {
            Issue.record("expected the delivery to be under way")
            return
        }
        _ = await attemptUnderWay.value(within: .seconds(600), on: SystemDeliveryClock())
        async let ended = recent.drain(within: .zero)
        // The drain has stopped the delivery but must not write while its attempt may still succeed (or fail).
        try await eventually("the drain stops the delivery") { delivery.control.isStopped }
        #expect(recent.inFlight == 1 && spool.writes.withLockedValue { $0 } == 0)
        #expect(spool.files.withLockedValue { $0.isEmpty })
        attemptMayEnd.settle(true)
        let handOvers = await ended
        guard case .spooled(let written)? = handOvers.first else {
            Issue.record("expected a spooled hand-over, got \(handOvers)")
            return
        }
        #expect(written.routes == ["b"])
        #expect(spool.files.withLockedValue { Array($0.values) } == [written])
        #expect(recent.inFlight == 0)
    }
}

@Test func aDeliveryThatEndsDuringTheHandOverLeavesNoFile() async throws {
    let spool = RecordingSpool()
    try await withRecentEvents(spool: spool) { recent in
        let mayEnd = Settlement<Bool>()
        // Acknowledged (spooled for its 202), then accepted on the attempt under way when the stop comes.
        let outcome = await recent.deliver(record(2), wait: .zero) { _, _ in
            _ = await mayEnd.value(within: .seconds(600), on: SystemDeliveryClock())
            return [report("a", .accepted)]
        }
        guard case .pending(let delivery, _) = outcome else {
            Issue.record("expected the delivery to be under way")
            return
        }
        guard case .spooled = try recent.acknowledge(delivery) else {
            Issue.record("expected it spooled")
            return
        }
        #expect(spool.files.withLockedValue { $0.count } == 1)
        async let ended = recent.drain(within: .zero)
        try await eventually("the drain stops the delivery") { delivery.control.isStopped }
        mayEnd.settle(true)
        guard case .settled? = await ended.first else {
            Issue.record("expected the delivery to settle")
            return
        }
        // Delivered: the file goes, so the next start does not send it again.
        #expect(spool.files.withLockedValue { $0.isEmpty })
    }
}

@Test func aSlowDiskHoldsOnlyItsOwnEventNotEveryWebhook() async throws {
    let hold = DispatchSemaphore(value: 0)
    let spool = RecordingSpool(hold: hold)
    try await withRecentEvents(spool: spool) { recent in
        let never = Settlement<Bool>()
        let slow = await recent.deliver(record(3), wait: .zero) { _, _ in
            _ = await never.value(within: .seconds(600), on: SystemDeliveryClock())
            return [report("a", .accepted)]
        }
        guard case .pending(let delivery, _) = slow else {
            Issue.record("expected the delivery to be under way")
            return
        }
        // The 202's write blocks on a slow disk, on a thread of its own.
        let writer = Thread { _ = try? recent.acknowledge(delivery) }
        writer.start()
        spool.entered.wait()
        // Meanwhile another webhook's event is looked up, delivered and settled: no lock it needs is held by the write.
        let other = Task { await recent.deliver(record(4), wait: .seconds(600)) { _, _ in [report("a", .accepted)] } }
        let outcome = await other.value
        hold.signal()
        never.settle(true)
        guard case .settled = outcome else {
            Issue.record("another event did not settle while the disk was slow: \(outcome)")
            return
        }
    }
}

@Test func theInFlightTableIsBounded() async throws {
    try await withRecentEvents(maxInFlight: 1) { recent in
        let release = Settlement<Bool>()
        guard
            case .pending = await recent.deliver(
                record(5), wait: .zero,
                { _, _ in
                    _ = await release.value(within: .seconds(600), on: SystemDeliveryClock())
                    return [report("a", .accepted)]
                })
        else {
            Issue.record("expected the first delivery under way")
            return
        }
        guard case .saturated = await recent.deliver(record(6), wait: .zero, { _, _ in [report("a", .accepted)] }) else {
            Issue.record("a second event was taken beyond the bound")
            return
        }
        // The same event again joins the one under way: a duplicate is not a new entry.
        guard case .pending = await recent.deliver(record(5), wait: .zero, { _, _ in [] }) else {
            Issue.record("the duplicate did not join")
            return
        }
        release.settle(true)
        try await eventually("the first settles") { recent.inFlight == 0 }
        guard case .settled = await recent.deliver(record(6), wait: .seconds(600), { _, _ in [report("a", .accepted)] }) else {
            Issue.record("room was not made once it settled")
            return
        }
    }
}

@Test func aDeliveryThatSettledBeforeItsAcknowledgementIsAnsweredAsSettledNot202() async throws {
    let spool = RecordingSpool()
    try await withRecentEvents(spool: spool) { recent in
        let gate = Settlement<Bool>()
        guard
            case .pending(let delivery, _) = await recent.deliver(
                record(7), wait: .zero,
                { _, _ in
                    _ = await gate.value(within: .seconds(600), on: SystemDeliveryClock())
                    return [report("a", .accepted)]
                })
        else {
            Issue.record("expected the answer before the delivery settled")
            return
        }
        gate.settle(true)
        _ = await delivery.reports.value(within: .seconds(600), on: SystemDeliveryClock())
        // The 202 would come with nothing on disk: the acknowledgement says what happened instead, and writes nothing.
        guard case .settled(let reports) = try recent.acknowledge(delivery) else {
            Issue.record("acknowledged a settled delivery")
            return
        }
        #expect(reports.map(\.status) == [.accepted])
        #expect(spool.writes.withLockedValue { $0 } == 0)
    }
}
