import FCMEmulator
import Foundation
import Testing

// MARK: Tests

@Test func withoutASpoolAnUnsettledDeliveryAnswers503AndTheRetryJoinsIt() async throws {
    try await withLiveRelay(environment: ["RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "0.3", "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "5"]) { relay in
        await relay.emulator.inject(.init(status: 503, retryAfter: "1", count: 1))
        let first = try await relay.post(#"{"versionNumber":31}"#, id: "msg_wait")
        #expect(first.status == 503)
        #expect(first.problemType == "urn:rc-relay:problem:delivery-in-progress")
        #expect(first.headers["retry-after"] == "1")
        try await Task.sleep(for: .milliseconds(200))
        let retry = try await relay.post(#"{"versionNumber":31}"#, id: "msg_wait")  // joins, and this time it settles
        #expect(retry.status == 200 || retry.status == 503)
        try await Task.sleep(for: .seconds(1))
        let later = try await relay.post(#"{"versionNumber":31}"#, id: "msg_wait")
        #expect(later.status == 200)
        #expect(later.json["duplicate"] as? Bool == true)
        #expect(await relay.emulator.messages.count == 1)
        #expect(await relay.emulator.stats.sendRequests == 2)
    }
}

@Test func withASpoolAnUnsettledDeliveryIsSpooledAnswered202AndUnspooledWhenDone() async throws {
    let spool = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-spool-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: spool) }
    try await withLiveRelay(environment: [
        "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "0.3", "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "5",
        "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool,
    ]) { relay in
        await relay.emulator.inject(.init(status: 503, retryAfter: "1", count: 1))
        let answer = try await relay.post(#"{"versionNumber":32}"#)
        #expect(answer.status == 202)
        #expect(answer.json["status"] as? String == "in-progress")
        let all = (try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? ["(no directory)"]
        let files = all.filter { $0.hasSuffix(".json") }
        #expect(files.count == 1, "\(all)")
        for _ in 0..<40 where await relay.emulator.messages.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        #expect(await relay.emulator.messages.count == 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool).filter { $0.hasSuffix(".json") }.isEmpty)
    }
}
