import DeliveryEngine
import FCMClient
import Foundation
import Testing

@testable import RelayServer

/// FCM's retry rules, which moved from the engine to FCM's sender (issue #51): each answer classified, then waited
/// for by the engine's policy, as before the move.
private func rejected(_ status: Int, code: String? = nil, retryAfter: String? = nil, now: Date = Date()) -> SendFailure {
    SendFailure(rejected: FCMErrorResponse(httpStatus: status, status: nil, errorCode: code, message: nil, retryAfter: retryAfter), now: now)
}

private let policy = RetryPolicy(baseDelay: .seconds(1), maximumDelay: .seconds(30), quotaDelay: .seconds(60))

@Suite struct FCMRulesTests {
    @Test(arguments: [400, 403, 404])
    func clientErrorsAreNeverRetried(status: Int) {
        #expect(rejected(status, code: "INVALID_ARGUMENT").kind == .permanent)
        #expect(policy.decision(after: rejected(status, code: "INVALID_ARGUMENT"), attempt: 1) == .permanent)
    }

    @Test func thirdPartyAuthAndARepeated401AreNeverRetried() {
        #expect(policy.decision(after: rejected(401, code: "THIRD_PARTY_AUTH_ERROR"), attempt: 1) == .permanent)
        #expect(policy.decision(after: rejected(401), attempt: 1) == .permanent)  // the client already refreshed once
    }

    @Test func unavailableAndTimeoutsBackOffAndConnectionErrorsToo() {
        #expect(rejected(503).kind == .transient && rejected(500).kind == .transient && rejected(408).kind == .transient)
        #expect(policy.decision(after: rejected(503), attempt: 3, random: { 1 }) == .retry(after: .seconds(4)))
        #expect(SendFailure(FCMError.transport("reset"), now: Date()).kind == .transient)
        #expect(SendFailure(FCMError.invalidResponse("no name"), now: Date()).kind == .transient)
    }

    @Test func aQuotaErrorIsThrottledAndItsRetryAfterNeverUndercut() {
        #expect(rejected(429, code: "QUOTA_EXCEEDED").kind == .throttled)
        let roomy = RetryPolicy(maximumDelay: .seconds(300), quotaDelay: .seconds(60))
        #expect(roomy.decision(after: rejected(429, code: "QUOTA_EXCEEDED"), attempt: 2) == .retry(after: .seconds(120)))
        #expect(roomy.decision(after: rejected(429, retryAfter: "600"), attempt: 1) == .retry(after: .seconds(600)))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let date = "Fri, 15 Jan 2027 08:00:10 GMT"  // 1_800_000_010
        #expect(policy.decision(after: rejected(503, retryAfter: date, now: now), attempt: 1, random: { 0 }) == .retry(after: .seconds(10)))
        let day = Duration.seconds(RetryPolicy.maximumRetryAfterSeconds)
        #expect(policy.decision(after: rejected(429, retryAfter: "9223372036854775807"), attempt: 40, random: { 1 }) == .retry(after: day))
    }

    @Test func tokenEndpointFailuresRetryUnlessTheKeyIsRefused() {
        #expect(SendFailure(TokenError.refused(status: 400, error: "invalid_grant", description: nil)).kind == .permanent)
        #expect(SendFailure(TokenError.refused(status: 503, error: nil, description: nil)).kind == .transient)
        #expect(SendFailure(TokenError.refused(status: 429, error: nil, description: nil)).kind == .transient)
        #expect(SendFailure(TokenError.transport("connection refused")).kind == .transient)
    }

    @Test func whatTheHistoryKeepsIsWhatFCMAnswered() {
        let failure = SendFailure(
            FCMError.rejected(FCMErrorResponse(httpStatus: 400, status: "INVALID_ARGUMENT", errorCode: nil, message: "bad topic", retryAfter: nil)),
            now: Date())
        #expect(failure.description == "FCM answered 400 INVALID_ARGUMENT: bad topic")
        #expect(failure.httpStatus == 400 && failure.errorCode == "INVALID_ARGUMENT")
        #expect(SendFailure(FCMError.transport("reset"), now: Date()).httpStatus == nil)
        #expect(SendFailure(FCMError.withheld("the lease moved"), now: Date()) == .withheld("the lease moved"))
    }
}
