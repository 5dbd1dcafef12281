import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayCore
import Testing

@testable import DeliveryEngine

/// Issue #49: a burst of versions during an FCM outage ends with the newest alone reaching FCM, and an older version
/// never follows a newer one to the same audience, whichever path sends it: a parked event tried again, a late
/// sender, or kept events replayed at start.
private let quiet = quietLogger

/// Version `version`'s ping: one route, one audience (topic PUSH_RC), its version in data as the relay's routes carry it.
private func stalePing(_ version: Int) -> Ping {
    let route = try! Route(RouteDefinition(name: "stale", topic: "PUSH_RC"), index: 0)
    var ping = Ping(route: route.name, project: "p", message: route.message(for: record(version).version, project: "p"))
    ping.message.data["CONFIG_VERSION"] = "\(version)"
    return ping
}

private func stalePlan(_ version: Int, _ sender: any MessageSender, policy: RetryPolicy = RetryPolicy()) -> DeliveryPlan {
    DeliveryPlan(pings: [stalePing(version)], send: SendPlan(sender: sender, policy: policy))
}

/// The CONFIG_VERSION of each message, in order.
private func versions(_ sent: [String]) -> [String] {
    sent.map { text in
        let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        return ((object?["data"] as? [String: Any])?["CONFIG_VERSION"] as? String) ?? "?"
    }
}

/// FCM answering at once, except a send of `held`, which waits until `release`; records what it accepted, in order.
private final class HoldingSender: MessageSender {
    let service = "FCM"
    let held: String
    let entered = Settlement<Bool>()
    let release = Settlement<Bool>()
    private let state = NIOLockedValueBox<[String]>([])
    init(holding version: String) { held = version }
    var accepted: [String] { state.withLockedValue { $0 } }

    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        let message = ByteBuffer(bytes: payload.encoded)
        if let reason = await beforeRequest() { throw .withheld(reason) }
        let version = versions([String(buffer: message)])[0]
        if version == held {
            entered.settle(true)
            _ = await release.value(within: .seconds(600), on: SystemDeliveryClock())
        }
        let count = state.withLockedValue { state in
            state.append(version)
            return state.count
        }
        return "projects/\(project)/messages/\(count)"
    }
}

/// Three kept versions whose retries ran out during an outage are parked a second apart; once FCM is back, each is
/// tried again at its turn, oldest first. Only the newest may reach FCM; the older two stand down.
@Test func afterAnOutageOnlyTheNewestParkedVersionIsSent() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool()
    let sender = ScriptedSender([ScriptedSender.unavailable(), ScriptedSender.unavailable(), ScriptedSender.unavailable()])
    var settings = EngineSettings()
    settings.parkedRetryInterval = .seconds(300)
    let policy = RetryPolicy(maximumAttempts: 1)  // each ping's retries run out at its first failure: it is parked
    try await withRunningEngine(spool: spool, settings: settings, clock: clock) { engine, _ in
        var deliveries: [RecentEvents.EventDelivery] = []
        for (index, version) in [10, 11, 12].enumerated() {
            if index > 0 { clock.advance(by: .seconds(1)) }
            let event = record(version)
            try spool.write(event)  // acknowledged (202): kept
            guard
                case .pending(let delivery, _) = await engine.deliver(
                    event, plan: stalePlan(version, sender, policy: policy), wait: .seconds(5), onDisk: true, logger: quiet)
            else {
                Issue.record("version \(version): a dead ping of a kept event should leave it pending")
                return
            }
            deliveries.append(delivery)
            await clock.waitForPending { $0.count == index + 1 }
        }
        #expect(engine.parked == 3)
        #expect(versions(sender.sent) == ["10", "11", "12"], "each failed once during the outage")
        // FCM is back. The parked events' tries fall due 298, 299 and 300 s from now, oldest first.
        var statuses: [[DeliveryReport.Status]] = []
        for (index, delivery) in deliveries.enumerated() {
            clock.advance(by: .seconds(index == 0 ? 298 : 1))
            let reports = try #require(await delivery.reports.value(within: .seconds(60), on: SystemDeliveryClock()))
            statuses.append(reports.map(\.status))
        }
        #expect(versions(sender.sent) == ["10", "11", "12", "12"], "after the outage, the newest version alone")
        #expect(statuses == [[.superseded], [.superseded], [.accepted]])
        #expect(engine.parked == 0)
        #expect(spool.files.withLockedValue { $0.isEmpty })
    }
}

/// While a newer version's request is under way (FCM has not answered), an older version's ping arriving late starts
/// no request: it stands down.
@Test func noOlderVersionStartsWhileANewerVersionsRequestIsUnderWay() async throws {
    let clock = ManualDeliveryClock()
    let sender = HoldingSender(holding: "12")
    try await withRunningEngine(clock: clock) { engine, _ in
        guard case .pending(let newer, _) = await engine.deliver(record(12), plan: stalePlan(12, sender), wait: .zero, logger: quiet)
        else {
            Issue.record("version 12 should be under way")
            return
        }
        _ = await sender.entered.value(within: .seconds(60), on: SystemDeliveryClock())
        guard case .settled(let older, false) = await engine.deliver(record(11), plan: stalePlan(11, sender), wait: .seconds(60), logger: quiet)
        else {
            Issue.record("version 11 should settle at once")
            return
        }
        #expect(older.map(\.status) == [.superseded])
        sender.release.settle(true)
        let reports = try #require(await newer.reports.value(within: .seconds(60), on: SystemDeliveryClock()))
        #expect(reports.map(\.status) == [.accepted])
        #expect(sender.accepted == ["12"])
    }
}

/// Three versions kept during an outage are replayed on the next start: only the newest is sent, the older two stand
/// down before any request, whatever the order the spool lists them in.
@Test func aReplayedBurstSendsOnlyItsNewestVersionPerAudience() async throws {
    let clock = ManualDeliveryClock()
    let spool = RecordingSpool(files: [record(10), record(11), record(12)])
    let sender = HoldingSender(holding: "12")
    try await withRunningEngine(spool: spool, clock: clock, replan: { stalePlan(Int($0.version.versionNumber), sender) }) { engine, _ in
        _ = await sender.entered.value(within: .seconds(60), on: SystemDeliveryClock())
        try await eventually("the two older versions settle while the newest is under way") {
            spool.files.withLockedValue { $0.count } == 1
        }
        sender.release.settle(true)
        try await eventually("the newest settles and leaves the spool") { spool.files.withLockedValue { $0.isEmpty } }
        #expect(sender.accepted == ["12"])
        let statuses = Dictionary(uniqueKeysWithValues: engine.history.list(.init()).map { ($0.version.versionNumber, $0.report?.status) })
        #expect(statuses == [10: .superseded, 11: .superseded, 12: .accepted])
    }
}
