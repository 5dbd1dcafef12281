import FCMEmulator
import Foundation
import Testing

// MARK: Tests

@Test func aRedeliveredWebhookSendsNothingTwice() async throws {
    try await withLiveRelay { relay in
        let first = try await relay.post(#"{"versionNumber":3}"#, id: "msg_same")
        let second = try await relay.post(#"{"versionNumber":3}"#, id: "msg_same")
        #expect(first.status == 200)
        #expect(second.status == 200)
        #expect(first.json["duplicate"] as? Bool == false)
        #expect(second.json["duplicate"] as? Bool == true)
        let names = { (answer: LiveRelay.Answer) in (answer.json["deliveries"] as? [[String: Any]])?.compactMap { $0["messageName"] as? String } }
        #expect(names(first) == names(second))
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func aCloudEventRetriedWithANewWebhookIDIsStillOneEvent() async throws {
    try await withLiveRelay { relay in
        let headers = binaryHeaders(id: "ce-retried")
        let first = try await relay.post(#"{"versionNumber":4}"#, headers: headers, id: "msg_a")
        let second = try await relay.post(#"{"versionNumber":4}"#, headers: headers, id: "msg_b")
        #expect(first.status == 200)
        #expect(second.json["duplicate"] as? Bool == true)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func concurrentDuplicatesWaitForTheFirstAndGetItsAnswer() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(latencyMs: 500))
        let answers = try await withThrowingTaskGroup(of: (status: Int, duplicate: Bool?).self) { group in
            for _ in 0..<5 {
                group.addTask {
                    let answer = try await relay.post(#"{"versionNumber":6}"#, id: "msg_burst")
                    return (answer.status, answer.json["duplicate"] as? Bool)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.allSatisfy { $0.status == 200 })
        #expect(answers.filter { $0.duplicate == false }.count == 1)
        #expect(await relay.emulator.messages.count == 1)
        #expect(await relay.emulator.stats.sendRequests == 1)
    }
}

@Test func aPermanentFailureIsRememberedSoARetrySendsNothing() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT", count: 5))
        let first = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        let retry = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(first.status == 200 && retry.status == 200)
        #expect(first.json["status"] as? String == "failed" && retry.json["duplicate"] as? Bool == true)
        #expect(await relay.emulator.stats.sendRequests == 1)
    }
}

@Test func aDeadDeliveryIsNotRememberedSoTheRetryDelivers() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 503, count: 3))  // all three attempts
        let failed = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(failed.status == 502)
        let retry = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(retry.status == 200)
        #expect(retry.json["duplicate"] as? Bool == false)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func differentVersionsAreNotDuplicates() async throws {
    try await withLiveRelay { relay in
        let first = try await relay.post(#"{"versionNumber":8}"#)
        let second = try await relay.post(#"{"versionNumber":9}"#)
        #expect(first.status == 200 && second.status == 200)
        #expect(await relay.emulator.messages.count == 2)
    }
}

@Test func theSameVersionByTwoWaysInIsOneEvent() async throws {
    try await withLiveRelay { relay in
        let cloudEvent = try await relay.post(try sample("template-version.json"), headers: binaryHeaders(id: "eventarc-1"))
        let forwarded = try await relay.post(#"{"versionNumber":"42","updateType":"INCREMENTAL_UPDATE"}"#, id: "msg_from_ci")
        #expect(cloudEvent.status == 200 && forwarded.status == 200)
        #expect(forwarded.json["duplicate"] as? Bool == true)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func aBurstOfVersionsDuringAnOutageSendsOnlyTheNewest() async throws {
    let routes = """
          - {name: default, topic: PUSH_RC, data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}}
          - {name: console, topic: RC_CONSOLE, data: {V: "{{version}}"}}
        """
    try await withLiveRelay(routes: routes, environment: ["RC_RELAY_DELIVERY_MAX_ATTEMPTS": "8"]) { relay in
        // Every retry waits at least a second, so the newer versions arrive while the older pings wait.
        await relay.emulator.inject(.init(status: 503, retryAfter: "1", count: 8))
        async let n = relay.post(#"{"versionNumber":100}"#)
        try await Task.sleep(for: .milliseconds(150))
        async let n1 = relay.post(#"{"versionNumber":101}"#)
        try await Task.sleep(for: .milliseconds(150))
        async let n2 = relay.post(#"{"versionNumber":102}"#)
        let statuses = { (answer: LiveRelay.Answer) in
            (answer.json["deliveries"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? String }
        }
        let (a, b, c) = try await (n, n1, n2)
        #expect(a.status == 200 && b.status == 200 && c.status == 200)
        #expect(statuses(a) == ["superseded", "superseded"])
        #expect(statuses(b) == ["superseded", "superseded"])
        #expect(statuses(c) == ["accepted", "accepted"])
        let sent = await relay.recordedMessages()
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { ($0["data"] as? [String: String])?.values.contains("102") == true })
    }
}

@Test func settledEventsAreForgottenAfterTheWindow() async throws {
    try await withLiveRelay(environment: ["RC_RELAY_DELIVERY_DEDUP_WINDOW_SECONDS": "0.5"]) { relay in
        let first = try await relay.post(#"{"versionNumber":40}"#, id: "msg_window")
        let soon = try await relay.post(#"{"versionNumber":40}"#, id: "msg_window")
        try await Task.sleep(for: .milliseconds(700))
        let later = try await relay.post(#"{"versionNumber":40}"#, id: "msg_window")
        #expect(first.status == 200 && soon.json["duplicate"] as? Bool == true)
        #expect(later.json["duplicate"] as? Bool == false)
        #expect(await relay.emulator.messages.count == 2)
    }
}

@Test func onlyTheNewestEventsAreRememberedBeyondTheCapacity() async throws {
    try await withLiveRelay(environment: ["RC_RELAY_DELIVERY_DEDUP_MAX_EVENTS": "4"]) { relay in
        // Each event is remembered under two keys (its id, and its project and version): four keys are two events.
        for version in 50...52 { #expect(try await relay.post(#"{"versionNumber":\#(version)}"#, id: "msg_cap_\(version)").status == 200) }
        let newest = try await relay.post(#"{"versionNumber":52}"#, id: "msg_cap_52")
        #expect(newest.json["duplicate"] as? Bool == true)
        let oldest = try await relay.post(#"{"versionNumber":50}"#, id: "msg_cap_50")
        #expect(oldest.json["duplicate"] as? Bool == false)
        #expect(await relay.emulator.messages.count == 4)
    }
}
