import Foundation
import NIOCore
import RelayCore
import Testing

@testable import DeliveryEngine

/// Issue #51: a project's pings go through the sender of what each carries (``SendPlan/sender(for:)``): FCM's for an
/// FCM message, its route's own for a call to an HTTP target, paced by the sender's own key and rate when it has one.
private final class PacedSender: MessageSender {
    let service = "webhook"
    let inner = ScriptedSender()
    var pace: (key: String, rate: Double)? { ("host:hooks.example.com", 2) }
    var sent: [String] { inner.sent }

    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        try await inner.send(payload, project: project, validateOnly: validateOnly, beforeRequest: beforeRequest)
    }
}

@Test func eachPingGoesThroughTheSenderOfWhatItCarries() async throws {
    let clock = ManualDeliveryClock()
    let fcm = ScriptedSender()
    let hooks = PacedSender()
    let version = record(7).version
    let fcmRoute = try Route(RouteDefinition(name: "default", topic: "PUSH_RC"), index: 0)
    let hookRoute = try Route(
        RouteDefinition(name: "hook", webhook: .init(url: .value("https://hooks.example.com/x"), format: "slack")), index: 1)
    let call = try #require(hookRoute.targetMessage(for: version, project: "p", change: .notNeeded, audiences: ["topic:PUSH_RC"]))
    let pings = [
        Ping(route: "default", project: "p", message: fcmRoute.message(for: version, project: "p")),
        Ping(route: "hook", project: "p", payload: .target(call)),
    ]
    var plan = SendPlan(sender: fcm, policy: RetryPolicy())
    plan.senders[PingPayload.sender(route: "hook")] = hooks
    try await withRunningEngine(clock: clock) { engine, _ in
        let reports = await engine.send(
            pings, batch: DeliveryBatch(version: version, eventID: nil, origin: .send, receivedAt: Date()), plan: plan, logger: quietLogger)
        #expect(reports.map(\.status) == [.accepted, .accepted])
        #expect(fcm.sent.count == 1 && fcm.sent[0].contains("PUSH_RC"))
        #expect(hooks.sent == [String(decoding: call.body, as: UTF8.self)])
        // The call's history entry names its route's target, not an FCM audience.
        #expect(engine.history.list(.init(route: "hook")).first?.audience == PingAudience(kind: "webhook", name: "hook"))
        // Paced by its host, at its own rate; the FCM ping by its project.
        let paces = engine.pacers.all.map { "\($0.project)=\($0.pacer.rate)" }
        #expect(Set(paces) == ["host:hooks.example.com=2.0", "p=1000.0"], "\(paces)")
    }
}
