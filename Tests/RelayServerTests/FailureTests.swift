import FCMEmulator
import Foundation
import Testing

// MARK: Tests

@Test func rejectedPingIsReportedAs502WithFCMsErrorCode() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
        let answer = try await relay.post(#"{"versionNumber":9}"#)
        #expect(answer.status == 502)
        #expect(answer.headers["content-type"] == "application/problem+json")
        #expect(answer.problemType == "urn:rc-relay:problem:delivery-failed")
        let delivery = (answer.json["deliveries"] as? [[String: Any]])?.first
        #expect(delivery?["status"] as? String == "failed")
        let error = delivery?["error"] as? [String: Any]
        #expect(error?["httpStatus"] as? Int == 400)
        #expect(error?["errorCode"] as? String == "INVALID_ARGUMENT")
        #expect(await relay.emulator.messages.isEmpty)
    }
}

@Test func unavailableFCMIsReportedHonestly() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 503, retryAfter: "1"))
        let answer = try await relay.post(#"{"versionNumber":9}"#)
        #expect(answer.status == 502)
        let error = (answer.json["deliveries"] as? [[String: Any]])?.first?["error"] as? [String: Any]
        #expect(error?["httpStatus"] as? Int == 503)
    }
}

@Test func unreachableFCMIsReportedHonestly() async throws {
    try await withLiveRelay(environment: ["RC_RELAY_FCM_BASE_URL": "http://127.0.0.1:9"]) { relay in
        let answer = try await relay.post(#"{"versionNumber":9}"#)
        #expect(answer.status == 502)
        let error = (answer.json["deliveries"] as? [[String: Any]])?.first?["error"] as? [String: Any]
        #expect((error?["message"] as? String)?.contains("could not be reached") == true)
    }
}

@Test func droppedConnectionIsReportedHonestly() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(drop: true))
        let answer = try await relay.post(#"{"versionNumber":9}"#)
        #expect(answer.status == 502)
        let error = (answer.json["deliveries"] as? [[String: Any]])?.first?["error"] as? [String: Any]
        #expect((error?["message"] as? String)?.contains("could not be reached") == true)
        #expect(await relay.emulator.messages.isEmpty)
        // The next webhook goes through on a fresh connection.
        #expect(try await relay.post(#"{"versionNumber":10}"#).status == 200)
    }
}

@Test func slowFCMBeyondTheTimeoutIsReportedHonestly() async throws {
    try await withLiveRelay(environment: ["RC_RELAY_FCM_TIMEOUT_SECONDS": "1"]) { relay in
        await relay.emulator.inject(.init(latencyMs: 2500))
        let answer = try await relay.post(#"{"versionNumber":9}"#)
        #expect(answer.status == 502)
        let error = (answer.json["deliveries"] as? [[String: Any]])?.first?["error"] as? [String: Any]
        #expect(error?["httpStatus"] == nil)
    }
}
