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

@Test func aFailedDeliveryIsNotRememberedSoTheRetryDelivers() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
        let failed = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(failed.status == 502)
        let retry = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(retry.status == 200)
        #expect(retry.json["duplicate"] as? Bool == false)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func differentEventsAreNotDuplicates() async throws {
    try await withLiveRelay { relay in
        let first = try await relay.post(#"{"versionNumber":8}"#)
        let second = try await relay.post(#"{"versionNumber":8}"#)
        #expect(first.status == 200 && second.status == 200)
        #expect(await relay.emulator.messages.count == 2)
    }
}
