import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import DeliveryEngine
@testable import RelayStore

/// Issue #50: a replica that takes a project over learns of every newer ping the previous holder sent, whenever that
/// holder's record of it lands (a settlement is not fenced: it records what FCM accepted).
extension StoreTests {
    /// The previous holder (a) admitted 58 and 59; FCM accepted 59's ping before the lease moved, and a's settlement of
    /// 59 lands between the new holder's (b's) two reads. Read first, the history lacked it and the pending rows did
    /// too, so b would have sent 58 after 59 (a stale ping). Now b finds 59 pending or accepted, whenever it lands.
    @Test(arguments: [false, true])
    func aTakeOverFindsANewerPingWhoseSettlementLandsBetweenItsReads(landsBefore: Bool) async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                let newer = try await admitted(58...59, by: a)[1]
                let accepted = DeliveryReport(route: "default", status: .accepted, messageName: "projects/demo/messages/59", attempts: [])
                // Its ping, named by its event's row as the engine names it.
                let ping = entry("p-1-e\(newer.storeRow ?? 0)", version: 59, report: accepted)
                // Written when the flush returns true: the settlement landed where the test put it.
                let landed = NIOLockedValueBox(false)
                let settle: @Sendable () async -> Void = {
                    a.outbox.record(ping)
                    a.outbox.settle(newer, reports: [accepted])
                    let written = await a.flush(within: .seconds(10))
                    landed.withLockedValue { $0 = written }
                }
                if landsBefore { await settle() }
                let read = try await b.takeOverRead(project: "demo") { if !landsBefore { await settle() } }
                #expect(landed.withLockedValue { $0 })
                let pending = read.pending.map(\.version.versionNumber)
                let acceptedVersions = read.accepted.map(\.version.versionNumber)
                // 58 waits either way; 59 is one or the other, so the sweep lets 58 stand down behind it.
                #expect(pending.contains(58))
                #expect(pending.contains(59) || acceptedVersions.contains(59), "pending \(pending), accepted \(acceptedVersions)")
            }
        }
    }
}
