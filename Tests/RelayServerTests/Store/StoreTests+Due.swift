import Foundation
import Testing

@testable import DeliveryEngine
@testable import RelayStore

/// Issue #52: which projects have anything to deliver, in one statement whatever their number.
extension StoreTests {
    @Test func oneStatementFindsTheHeldProjectsWithEventsPending() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1) { stores in
                let store = stores[0]
                try await store.migrate()
                let projects = (0..<500).map { "idle-\($0)" }
                #expect(try await store.projectsWithPending(projects) == [])
                // Pending: one event of idle-7, one of idle-300 and one of a project not asked about; settled: idle-8's.
                var settled = record(project: "idle-8", version: 2)
                for event in [record(project: "idle-7"), record(project: "idle-300"), record(project: "elsewhere"), settled] {
                    guard case .admitted(let id) = try await store.admit(event, window: .seconds(600)) else {
                        Issue.record("\(event.project) was not admitted")
                        return
                    }
                    if event.project == "idle-8" { settled.storeRow = id }
                }
                store.outbox.settle(settled, reports: [])
                await store.flush()
                #expect(try await store.projectsWithPending(projects) == ["idle-7", "idle-300"])
                #expect(try await store.projectsWithPending(["idle-8", "elsewhere"]) == ["elsewhere"])
                #expect(try await store.projectsWithPending([]) == [])
                // Rows are passed for good only once settled and older than the lag: none here yet, so the next
                // call reads them all again and still finds the pending ones.
                #expect(store.dueThrough.withLockedValue { $0 } == 0)
                #expect(try await store.projectsWithPending(projects) == ["idle-7", "idle-300"])
            }
        }
    }
}
