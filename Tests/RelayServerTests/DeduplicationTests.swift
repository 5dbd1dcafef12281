import FCMClient
import FCMEmulator
import Foundation
import RelayCore
import Testing

@testable import RelayServer

// MARK: Tests

@Test func aRedeliveredWebhookSendsNothingTwice() async throws {
    try await withLiveRelay { relay in
        let first = try await relay.post(#"{"versionNumber":3}"#, id: "msg_same")
        let second = try await relay.post(#"{"versionNumber":3}"#, id: "msg_same")
        #expect(first.status == 200)
        #expect(second.status == 200)
        #expect(try first.delivered.duplicate == false)
        #expect(try second.delivered.duplicate == true)
        let names = { (answer: LiveRelay.Answer) throws in try answer.delivered.deliveries.compactMap(\.messageName) }
        #expect(try names(first) == names(second))
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func aCloudEventRetriedWithANewWebhookIDIsStillOneEvent() async throws {
    try await withLiveRelay { relay in
        let headers = binaryHeaders(id: "ce-retried")
        let first = try await relay.post(#"{"versionNumber":4}"#, headers: headers, id: "msg_a")
        let second = try await relay.post(#"{"versionNumber":4}"#, headers: headers, id: "msg_b")
        #expect(first.status == 200)
        #expect(try second.delivered.duplicate == true)
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
                    return (answer.status, try? answer.delivered.duplicate)
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
        #expect(try first.delivered.status == .failed && retry.delivered.duplicate == true)
        #expect(await relay.emulator.stats.sendRequests == 1)
    }
}

@Test func aDeadDeliveryIsNotRememberedSoTheRetryDelivers() async throws {
    try await withLiveRelay { relay in
        await relay.emulator.inject(.init(status: 503, count: 3))  // all three attempts
        let failed = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(failed.status == 503)
        #expect(try await relay.settledDelivery(version: 7).status == .dead)
        let retry = try await relay.post(#"{"versionNumber":7}"#, id: "msg_retry")
        #expect(retry.status == 200)
        #expect(try retry.delivered.duplicate == false)
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
        #expect(try forwarded.delivered.duplicate == true)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func aBurstOfVersionsDuringAnOutageSendsOnlyTheNewest() async throws {
    let routes = """
          - {name: default, topic: PUSH_RC, data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}}
          - {name: console, topic: RC_CONSOLE, data: {V: "{{version}}"}}
        """
    try await withLiveRelay(.standard.routes(routes).environment(["RC_RELAY_DELIVERY_MAX_ATTEMPTS": "8"])) { relay in
        // Every first attempt fails and asks for 5 s; each webhook is answered at its first failure, so all three
        // versions have started (102 is the newest claimed) long before the older pings' retries come due.
        await relay.emulator.inject(.init(status: 503, retryAfter: "5", count: 8))
        for version in 100...102 {
            let answer = try await relay.post(#"{"versionNumber":\#(version)}"#)
            #expect(answer.status == 503)
        }
        var statuses: [Int: [Components.Schemas.DeliveryStatus]] = [:]
        for version in 100...102 {
            statuses[version] = try await relay.settledDeliveries(version: version, count: 2).map(\.status)
        }
        #expect(statuses[100] == [.superseded, .superseded])
        #expect(statuses[101] == [.superseded, .superseded])
        #expect(statuses[102] == [.accepted, .accepted])
        let sent = await relay.recordedMessages()
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { ($0["data"] as? [String: String])?.values.contains("102") == true })
    }
}

@Test func onlyTheNewestEventsAreRememberedBeyondTheCapacity() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_DELIVERY_DEDUP_MAX_EVENTS": "2"])) { relay in
        // Counted in events, as documented, whatever number of keys (id, version, webhook-id) each is known by.
        for version in 50...52 { #expect(try await relay.post(#"{"versionNumber":\#(version)}"#, id: "msg_cap_\(version)").status == 200) }
        let newest = try await relay.post(#"{"versionNumber":52}"#, id: "msg_cap_52")
        #expect(try newest.delivered.duplicate == true)
        let oldest = try await relay.post(#"{"versionNumber":50}"#, id: "msg_cap_50")
        #expect(try oldest.delivered.duplicate == false)
        // Forgotten, so a new event; but FCM accepted a newer version's ping to the same audience already, so an
        // older one does not follow it there (issue 32): it ends superseded, and nothing more is sent.
        #expect(try oldest.delivered.deliveries.map(\.status) == [.superseded])
        // And the answer says so: nothing was delivered for this version (issue #49).
        #expect(try oldest.delivered.status == .superseded)
        #expect(await relay.emulator.messages.count == 3)
    }
}

@Test func aReplayedSignedRequestWithUnsignedHeadersChangedSendsNothing() async throws {
    try await withLiveRelay(
        .standard.secondProject().extraYAML { relay in
            """
            projects:
              - id: demo-project
              - id: game-b
                credentialsFile: "\(relay.gameBKeyFile)"
            """
        }
    ) { relay in
        let body = #"{"versionNumber":"90"}"#
        let timestamp = Int64(Date().timeIntervalSince1970)
        let first = try await relay.post(body, headers: binaryHeaders(id: "ce-original"), id: "msg_captured", timestamp: timestamp)
        #expect(first.status == 200)
        // Only webhook-id, webhook-timestamp and the body are signed: the same signature, other ce-source and ce-id.
        let otherProject = try await relay.post(
            body, headers: binaryHeaders(id: "ce-original", source: "//firebaseremoteconfig.googleapis.com/projects/game-b"),
            id: "msg_captured", timestamp: timestamp)
        #expect(otherProject.status == 409)
        #expect(otherProject.problemType == "urn:rc-relay:problem:event-id-conflict")
        let otherID = try await relay.post(body, headers: binaryHeaders(id: "ce-forged"), id: "msg_captured", timestamp: timestamp)
        #expect(otherID.status == 200)
        #expect(try otherID.delivered.duplicate == true)
        let sent = await relay.emulator.messages
        #expect(sent.count == 1)
        #expect(sent.allSatisfy { $0.project == "demo-project" })
    }
}

@Test func anEventKnownOnlyByItsWebhookIDIsOneKeyNotTwo() async throws {
    try await withLiveRelay(.standard) { relay in
        // A bare signed version: its id is its webhook-id, a key across projects, and it is known by nothing else.
        #expect(try await relay.post(#"{"versionNumber":"70"}"#, id: "msg_only_id").status == 200)
        // Its retry is the same event by that key.
        #expect(try await relay.post(#"{"versionNumber":"70"}"#, id: "msg_only_id").delivered.duplicate == true)
        // A CloudEvent of another version whose ce-id happens to be that webhook-id, signed under its own webhook-id,
        // is another event: the ce-id is matched against other events' ids, not against webhook-ids.
        let other = try await relay.post(#"{"versionNumber":"71"}"#, headers: binaryHeaders(id: "msg_only_id"), id: "msg_other_sender")
        #expect(other.status == 200)
        #expect(try other.delivered.duplicate == false)
        // And a CloudEvent that repeats that ce-id with another version is refused as a conflict, as before.
        let conflict = try await relay.post(#"{"versionNumber":"72"}"#, headers: binaryHeaders(id: "msg_only_id"), id: "msg_third")
        #expect(conflict.status == 409)
        #expect(await relay.emulator.messages.count == 2)
    }
}
