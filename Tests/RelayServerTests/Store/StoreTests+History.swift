import Foundation
import Testing

@testable import DeliveryEngine
@testable import RelayStore

/// Issue #50: the delivery history without a second write per ping. A ping's settled copy rides its event's settlement
/// (the row's HOT update); what cannot ride one is kept apart, in `rc_relay_pings`, and every read finds both.
extension StoreTests {
    @Test func aPingsHistoryRidesItsEventsSettlement() async throws {
        try await withPostgres { cluster in
            try await withReplicas(cluster) { stores in
                let (a, b) = (stores[0], stores[1])
                try await a.migrate()
                let events = try await admitted(1...3, by: a)
                let accepted = DeliveryReport(route: "default", status: .accepted, messageName: "projects/demo/messages/1", attempts: [])
                // A ping named by its event's row, as the engine names it, and received when its event was.
                func ping(_ number: Int, of event: EventRecord, report: DeliveryReport? = nil) -> DeliveryHistory.Entry {
                    var ping = entry("p-\(number)-e\(event.storeRow ?? 0)", version: event.version.versionNumber, report: report)
                    ping.receivedAt = Date(timeIntervalSince1970: 1_700_000_000 + Double(event.version.versionNumber))
                    return ping
                }
                // By id: a copy held a round for its event's settlement may be written after a later one.
                let apart = "SELECT coalesce(string_agg(id || ':' || status, ',' ORDER BY id), '') FROM rc_relay_pings"
                // 1: its pending and settled copies and its event's settlement in one round: written once, in the row.
                a.outbox.record(ping(1, of: events[0]))
                a.outbox.record(ping(1, of: events[0], report: accepted))
                a.outbox.settle(events[0], reports: [])
                #expect(await a.flush(within: .seconds(10)))
                #expect(try await cluster.sql(apart) == "")
                // 2: its pending copy written apart first (a flush), then its settled copy rides the settlement, which
                // deletes the pending row.
                a.outbox.record(ping(2, of: events[1]))
                #expect(await a.flush(within: .seconds(10)))
                #expect(try await cluster.sql(apart) == "p-2-e\(events[1].storeRow ?? 0):pending")
                a.outbox.record(ping(2, of: events[1], report: accepted))
                a.outbox.settle(events[1], reports: [])
                #expect(await a.flush(within: .seconds(10)))
                #expect(try await cluster.sql(apart) == "")
                #expect(try await cluster.sql("SELECT count(*) FROM rc_relay_outbox WHERE pings IS NOT NULL") == "2")
                // 3: a ping that settles after its event: apart. An admin send: apart, and the newest.
                a.outbox.settle(events[2], reports: [])
                #expect(await a.flush(within: .seconds(10)))
                let dead = DeliveryReport(route: "default", status: .dead, attempts: [])
                a.outbox.record(ping(3, of: events[2], report: dead))
                var send = entry("send-1", version: 9, report: accepted)
                send.receivedAt = Date(timeIntervalSince1970: 1_700_000_100)
                a.outbox.record(send)
                #expect(await a.flush(within: .seconds(10)))
                let written = try await cluster.sql(apart)
                #expect(written == "p-3-e\(events[2].storeRow ?? 0):dead,send-1:accepted")
                // A late settlement (another replica settled the event already): its ping's copy goes apart, not lost.
                b.outbox.record(ping(9, of: events[0], report: accepted))
                b.outbox.settle(events[0], reports: [])
                #expect(await b.flush(within: .seconds(10)))
                #expect(try await cluster.sql(apart).contains("p-9-e\(events[0].storeRow ?? 0):accepted"))

                // Any replica reads both places, each ping once, newest event first.
                let log = SharedDeliveryLog(store: b)
                let (first, second, third) = (events[0].storeRow ?? 0, events[1].storeRow ?? 0, events[2].storeRow ?? 0)
                #expect(try await log.list(.init()).map(\.id) == ["send-1", "p-3-e\(third)", "p-2-e\(second)", "p-9-e\(first)", "p-1-e\(first)"])
                #expect(try await log.list(.init(status: "accepted", version: 2)).map(\.id) == ["p-2-e\(second)"])
                #expect(try await log.list(.init(status: "pending")).isEmpty)
                #expect(try await log.list(.init(route: "beta")).isEmpty)
                #expect(try await log.list(.init(limit: 2)).map(\.id) == ["send-1", "p-3-e\(third)"])
                #expect(try await log.entry("p-1-e\(first)") == ping(1, of: events[0], report: accepted))
                #expect(try await log.entry("p-3-e\(third)")?.report?.status == .dead)
                #expect(try await log.entry("p-7-e\(first)") == nil)
                // The rows of the newest `historySize` events are read: with one, only the newest event's row.
                #expect(try await SharedDeliveryLog(store: b, keep: 1).list(.init(version: 1)).map(\.id) == ["p-9-e\(first)"])
                // A take-over reads what FCM accepted from both places, and after a reset neither.
                #expect(try await b.acceptedPings(project: "demo").map(\.id) == ["send-1", "p-2-e\(second)", "p-9-e\(first)", "p-1-e\(first)"])
                #expect(try await b.resetRelayed(project: "demo") == 1)
                #expect(try await b.acceptedPings(project: "demo").isEmpty)

                // A pending copy held for its event's settlement is written within a round when none comes, flush or not.
                a.outbox.record(ping(4, of: events[2]))
                try await eventually("the held pending copy is written") {
                    (try? await cluster.sql(apart))?.contains("p-4-e\(third):pending") == true
                }
            }
        }
    }

    /// A pending copy waits up to 50 ms (on the store's clock) for its event's settlement, however many of the writer's
    /// rounds pass meanwhile (under load they come every millisecond or two): the settled copy then rides the settlement,
    /// leaving out its project and its report, which the row has, and reads back whole. One whose event has not settled
    /// after 50 ms is written apart.
    @Test func aPendingCopyWaitsUpTo50MillisecondsForItsEventsSettlement() async throws {
        let clock = ManualDeliveryClock()
        try await withPostgres { cluster in
            try await withReplicas(cluster, count: 1, clock: clock) { stores in
                let a = stores[0]
                try await a.migrate()
                var rows: [Int64] = []
                var events: [EventRecord] = []
                for version in Int64(1)...2 {
                    var event = record(version: version, id: "evt-\(version)")
                    guard case .admitted(let row) = try await a.admit(event, window: .seconds(600)) else {
                        Issue.record("version \(version) was not admitted")
                        return
                    }
                    event.storeRow = row
                    (rows, events) = (rows + [row], events + [event])
                }
                let apart = "SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM rc_relay_pings"
                let id = "p-1-e\(rows[0])"
                a.outbox.record(entry(id, version: 1))
                // Five rounds, each seen by an admin send's copy (no event row: written at once), the clock still.
                let sent = DeliveryReport(route: "default", status: .accepted, messageName: "projects/demo/messages/9", attempts: [])
                for round in 1...5 {
                    a.outbox.record(entry("send-\(round)", version: 9, report: sent))
                    try await eventually("round \(round) is written") { (try? await cluster.sql(apart))?.contains("send-\(round)") == true }
                }
                #expect(try await cluster.sql(apart) == "send-1,send-2,send-3,send-4,send-5")
                let accepted = DeliveryReport(id: id, route: "default", status: .accepted, messageName: "projects/demo/messages/1", attempts: [])
                var settled = entry(id, version: 1, report: accepted)
                settled.settledAt = clock.now()
                a.outbox.record(settled)
                a.outbox.settle(events[0], reports: [accepted])
                #expect(await a.flush(within: .seconds(10)))
                #expect(try await cluster.sql(apart) == "send-1,send-2,send-3,send-4,send-5")
                #expect(
                    try await cluster.sql(
                        "SELECT position('\"report\"' in pings) = 0 AND position('\"project\"' in pings) = 0 FROM rc_relay_outbox WHERE id = \(rows[0])"
                    )
                        == "t")
                #expect(try await SharedDeliveryLog(store: a).entry(id) == settled)
                // The second event does not settle: 50 ms later its ping's pending copy is written apart.
                let late = "p-1-e\(rows[1])"
                a.outbox.record(entry(late, version: 2))
                a.outbox.record(entry("send-6", version: 9, report: sent))
                try await eventually("the round is written") { (try? await cluster.sql(apart))?.contains("send-6") == true }
                #expect(try await !cluster.sql(apart).contains(late))
                clock.advance(by: .milliseconds(50))
                try await eventually("the copy is written apart") { (try? await cluster.sql(apart))?.contains(late) == true }
                clock.release()
            }
        }
    }
}
