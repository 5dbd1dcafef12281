import Foundation
import RelayCore
import Testing

@testable import DeliveryEngine
@testable import RelayStore

/// The queue between the engine and the store, without a database: the history copies it holds while the database is
/// away are bounded, and the outbox's own changes never are.
struct OutboxSpoolTests {
    @Test func historyCopiesStopAtTheLimitButSettlementsAreAlwaysQueued() {
        let outbox = OutboxSpool()
        let entry = DeliveryHistory.Entry(
            id: "e", project: "demo", route: "default", version: TemplateVersion(versionNumber: 1), eventID: nil, origin: .webhook,
            retryOf: nil, toDevice: false, validateOnly: false, receivedAt: Date(), settledAt: nil, report: nil)
        for _ in 0...OutboxSpool.journalLimit { outbox.record(entry) }
        let record = EventRecord(
            keys: ["demo/version/1"], project: "demo", eventID: nil, format: "bare", version: TemplateVersion(versionNumber: 1), receivedAt: Date())
        outbox.settle(record, reports: [])
        let changes = outbox.take()
        #expect(changes.count == OutboxSpool.journalLimit + 1)
        guard case .settle = changes.last else {
            Issue.record("the settlement was not queued after the history copies reached their limit")
            return
        }
        // Once taken (written), copies are queued again.
        outbox.record(entry)
        #expect(outbox.take().count == 1)
    }

    /// An update that a settlement of the same event follows in the same round is not written (the settlement
    /// overwrites it), unless a flush comes between them; another event's update is written.
    @Test func anUpdateSettledInTheSameRoundIsMootUnlessAFlushComesBetween() {
        func record(_ version: Int64) -> EventRecord {
            EventRecord(
                keys: ["demo/version/\(version)"], project: "demo", eventID: nil, format: "bare", version: TemplateVersion(versionNumber: version),
                receivedAt: Date())
        }
        let changes: [OutboxSpool.Change] = [
            .update(record(1)),  // 0: settled at 2: moot
            .update(record(2)),  // 1: never settled here: written
            .settle(record(1), []),  // 2
            .update(record(3)),  // 3: a flush comes before its settlement: written
            .flush(Settlement<Bool>()),  // 4
            .settle(record(3), []),  // 5
            .update(record(4)),  // 6: settled at 7: moot
            .settle(record(4), []),  // 7
            .update(record(1)),  // 8: after its settlement: written (the store ignores an update of a settled event)
        ]
        #expect(OutboxSpool.mootUpdates(changes) == [0, 6])
    }
}
