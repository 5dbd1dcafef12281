import FCMEmulator
import Foundation
import Testing

@testable import DeliveryEngine
@testable import RelayServer

// Answers come as soon as the outcome is known: the relay waits up to 30 s here (`answerWithinSeconds`), so an answer
// that waited for the delivery would be a 200, not the 503 or 202 these tests expect.

// MARK: Tests

@Test func withoutASpoolAFirstFailureAnswers503AtOnceWithTheRealRetryAfterAndTheRetryJoins() async throws {
    let clock = ManualDeliveryClock()
    try await withLiveRelay(
        .standard.environment(["RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "30", "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "5"]).clock(clock)
    ) { relay in
        await relay.emulator.inject(.init(status: 503, retryAfter: "120", count: 1))
        let first = try await relay.post(#"{"versionNumber":31}"#, id: "msg_wait")
        #expect(first.status == 503)
        #expect(first.problemType == "urn:rc-relay:problem:delivery-in-progress")
        #expect(first.headers["retry-after"] == "120")
        try await advanceThroughRetries(clock, times: 1)
        try await eventually("the retry is accepted") { await relay.emulator.messages.count == 1 }
        let later = try await relay.post(#"{"versionNumber":31}"#, id: "msg_wait")
        #expect(later.status == 200)
        #expect(try later.delivered.duplicate == true)
        #expect(await relay.emulator.messages.count == 1)
        #expect(await relay.emulator.stats.sendRequests == 2)
    }
}

@Test func withASpoolAFirstFailureIsSpooledAnswered202AtOnceAndUnspooledWhenDone() async throws {
    let clock = ManualDeliveryClock()
    try await withSpool { spool in
        try await withLiveRelay(
            .standard.environment([
                "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "30", "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "5",
                "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool,
            ]).clock(clock)
        ) { relay in
            await relay.emulator.inject(.init(status: 503, retryAfter: "120", count: 1))
            let answer = try await relay.post(#"{"versionNumber":32}"#)
            #expect(answer.status == 202)
            #expect(try answer.decode(Contract.InProgress.self).status == .inProgress)
            #expect(spooledFiles(spool).count == 1)
            try await advanceThroughRetries(clock, times: 1)
            try await eventually("the retry is accepted") { await relay.emulator.messages.count == 1 }
            try await eventually("the spool file is removed") { spooledFiles(spool).isEmpty }
        }
    }
}

@Test func anAcknowledgedEventOutlivesAnOutageLongerThanTheDeadlineAndIsDeliveredWhenFCMIsBack() async throws {
    try await withSpool { spool in
        try await withLiveRelay(
            .standard.environment([
                "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "2", "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool, "RC_RELAY_READINESS_CACHE_SECONDS": "0",
            ])
        ) { relay in
            await relay.emulator.inject(.init(status: 503, count: 1_000_000))
            #expect(try await relay.post(#"{"versionNumber":33}"#).status == 202)
            // Retries run out: the ping is dead, and the event stays on disk, shown to operators.
            try await eventually("the ping is dead") {
                !(try await relay.admin(.GET, "/admin/deliveries?status=dead").deliveries.isEmpty)
            }
            #expect(spooledFiles(spool).count == 1)
            try await eventually("the metric counts it") {
                try await relay.admin(.GET, "/metrics").text.contains("rc_relay_undelivered_events 1")
            }
            let ready = try await relay.admin(.GET, "/readyz", token: nil)
            let undelivered = try ready.decode(Components.Schemas.Readiness.self).checks.first { $0.name == "undelivered" }
            #expect(undelivered?.detail.hasPrefix("1 acknowledged event") == true)
            // FCM comes back: the parked event is tried again and delivered, and its file goes.
            await relay.emulator.reset()
            try await eventually("the event is delivered") { await relay.emulator.messages.count == 1 }
            try await eventually("the spool file is removed") { spooledFiles(spool).isEmpty }
            try await eventually("the metric is back to zero") {
                try await relay.admin(.GET, "/metrics").text.contains("rc_relay_undelivered_events 0")
            }
            #expect(await relay.emulator.messages.count == 1)
        }
    }
}

@Test func anOperatorDiscardsADeadPingOfAnAcknowledgedEvent() async throws {
    try await withSpool { spool in
        try await withLiveRelay(.standard.environment(["RC_RELAY_DELIVERY_MAX_ATTEMPTS": "1", "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool])) {
            relay in
            // One attempt: the first failure is already dead, so without the spool the sender would get 502.
            await relay.emulator.inject(.init(status: 503, count: 1_000_000))
            let accepted = try await relay.post(#"{"versionNumber":"5"}"#, id: "msg_ok")
            #expect(accepted.status == 502)
            var dead: String?
            try await eventually("a dead ping is listed") {
                dead = try await relay.admin(.GET, "/admin/deliveries?status=dead").deliveries.first?.id
                return dead != nil
            }
            // Not acknowledged (answered 502, never spooled): nothing waits, so there is nothing to discard.
            let refused = try await relay.admin(.POST, "/admin/deliveries/\(try #require(dead))/discard")
            #expect(refused.status == 409)
            #expect(refused.problemType == "urn:rc-relay:problem:not-discardable")
        }
    }
    try await withSpool { spool in
        try await withLiveRelay(.standard.environment(["RC_RELAY_DELIVERY_MAX_ATTEMPTS": "2", "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool])) {
            relay in
            await relay.emulator.inject(.init(status: 503, count: 1_000_000))
            #expect(try await relay.post(#"{"versionNumber":"6"}"#).status == 202)
            var dead: String?
            try await eventually("a dead ping is listed") {
                dead = try await relay.admin(.GET, "/admin/deliveries?status=dead").deliveries.first?.id
                return dead != nil
            }
            let discarded = try await relay.admin(.POST, "/admin/deliveries/\(try #require(dead))/discard")
            #expect(discarded.status == 200, "\(discarded.text)")
            try await eventually("the spool file is removed") { spooledFiles(spool).isEmpty }
            try await eventually("nothing waits any more") {
                try await relay.admin(.GET, "/metrics").text.contains("rc_relay_undelivered_events 0")
            }
            #expect(await relay.emulator.messages.isEmpty)
        }
    }
}

@Test func theSameIDForAnotherEventIsAConflictAndSendsNothing() async throws {
    try await withLiveRelay { relay in
        #expect(try await relay.post(#"{"versionNumber":40}"#, id: "msg_reused").status == 200)
        let other = try await relay.post(#"{"versionNumber":41}"#, id: "msg_reused")
        #expect(other.status == 409)
        #expect(other.problemType == "urn:rc-relay:problem:event-id-conflict")
        #expect(await relay.emulator.messages.count == 1)
        // The same event again is a duplicate, as before.
        #expect(try await relay.post(#"{"versionNumber":40}"#, id: "msg_reused").delivered.duplicate == true)
    }
}
