import AsyncHTTPClient
import Foundation
import Testing

@testable import RelayServer

private let threeRoutes = """
      - name: default
        topic: PUSH_RC
        data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
      - name: rollbacks
        condition: "'ios' in topics || 'android' in topics"
        data: {CONFIG_STATE: STALE, ROLLED_BACK_TO: "{{rollbackSource}}", BY: "{{authorEmail}}"}
        when: {updateTypes: [ROLLBACK]}
        android: {priority: high, collapseKey: rc-rollback, ttlSeconds: 3600}
        webpush: {ttlSeconds: 60, urgency: normal}
      - name: console
        topic: rc-console
        data: {ORIGIN: "{{updateOrigin}}", PROJECT: "{{project}}"}
        when: {origins: [CONSOLE]}
    """

// MARK: Tests

@Test func binaryCloudEventBecomesTheDocumentedPing() async throws {
    try await withLiveRelay { relay in
        let answer = try await relay.post(try sample("template-version.json"), headers: binaryHeaders(id: "ce-42"))
        #expect(answer.status == 200)
        let delivered = try answer.delivered
        #expect(delivered.status == .delivered)
        #expect(delivered.event.id == "ce-42")
        #expect(delivered.event.versionNumber == "42")
        #expect(delivered.event.format == .cloudEventBinary)
        let recorded = await relay.emulator.messages
        #expect(recorded.count == 1)
        #expect(delivered.deliveries.first?.messageName == recorded.first?.name)
        let example = try JSONSerialization.jsonObject(with: Data(try sample("fcm-silent-ping-example.json").utf8))
        let expected = try #require((example as? NSDictionary)?["message"] as? NSDictionary)
        #expect(NSDictionary(dictionary: await relay.recordedMessages()[0]) == expected)
    }
}

@Test func structuredCloudEventIsRelayed() async throws {
    try await withLiveRelay { relay in
        let answer = try await relay.post(try sample("cloudevent-structured.json"), contentType: "application/cloudevents+json")
        #expect(answer.status == 200)
        #expect(try answer.delivered.event.format == .cloudEventStructured)
        let data = await relay.recordedMessages().first?["data"] as? [String: String]
        #expect(data == ["CONFIG_STATE": "STALE", "CONFIG_VERSION": "42"])
    }
}

@Test func bareVersionWithNumberIsRelayedToEveryMatchingRoute() async throws {
    try await withLiveRelay(.standard.routes(threeRoutes)) { relay in
        let answer = try await relay.post(try sample("rollback-version.json"))
        #expect(answer.status == 200)
        #expect(try answer.delivered.deliveries.map(\.route) == ["default", "rollbacks"])
        let messages = await relay.recordedMessages()
        #expect(messages.count == 2)
        let rollback = messages.first { $0["condition"] != nil }
        #expect(
            rollback?["data"] as? [String: String] == [
                "CONFIG_STATE": "STALE", "ROLLED_BACK_TO": "41", "BY": "deploy-bot@demo-project.iam.gserviceaccount.com",
            ])
        #expect((rollback?["android"] as? [String: String])?["priority"] == "high")
        #expect((rollback?["android"] as? [String: String])?["ttl"] == "3600s")
        #expect((rollback?["webpush"] as? [String: Any]) as NSDictionary? == ["headers": ["TTL": "60", "Urgency": "normal"]])
    }
}

@Test func consoleFilterTakesConsoleUpdatesOnly() async throws {
    try await withLiveRelay(.standard.routes(threeRoutes)) { relay in
        let answer = try await relay.post(#"{"versionNumber":"7","updateOrigin":"CONSOLE","updateType":"FORCED_UPDATE"}"#)
        #expect(answer.status == 200)
        let console = await relay.recordedMessages().first { $0["topic"] as? String == "rc-console" }
        #expect(console?["data"] as? [String: String] == ["ORIGIN": "CONSOLE", "PROJECT": "demo-project"])
        #expect(await relay.emulator.messages.count == 2)
    }
}

@Test func validateOnlyAsksFCMToCheckWithoutDelivering() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_FCM_VALIDATE_ONLY": "true"])) { relay in
        let answer = try await relay.post(#"{"versionNumber":5}"#)
        #expect(answer.status == 200)
        #expect(try answer.delivered.deliveries.first?.status == .validated)
        #expect(await relay.emulator.messages.isEmpty)
        #expect(await relay.emulator.stats.validatedOnly == 1)
    }
}

@Test func noMatchingRouteAnswers200WithNoDeliveries() async throws {
    let rollbacksOnly = """
          - topic: t
            when: {updateTypes: [ROLLBACK]}
        """
    try await withLiveRelay(.standard.routes(rollbacksOnly)) { relay in
        let answer = try await relay.post(#"{"versionNumber":5,"updateType":"INCREMENTAL_UPDATE"}"#)
        #expect(answer.status == 200)
        #expect(try answer.delivered.deliveries.isEmpty)
        #expect(await relay.emulator.stats.sendRequests == 0)
    }
}

@Test func echoesTheCallersRequestID() async throws {
    try await withLiveRelay { relay in
        let answer = try await relay.post(#"{"versionNumber":5}"#, headers: ["X-Request-Id": "req-abc-123"])
        #expect(answer.headers["x-request-id"] == "req-abc-123")
        #expect(try answer.delivered.requestId == "req-abc-123")
    }
}

@Test func healthzAnswers() async throws {
    try await withLiveRelay { relay in
        var request = HTTPClientRequest(url: relay.relayURL + "/healthz")
        request.method = .GET
        let answer = try await relay.send(request)
        #expect(answer.status == 200)
        #expect(try answer.decode(Contract.Health.self).status == .ok)
    }
}
