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
        let record = SpoolRecord(
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
}
