import DeliveryEngine
import Foundation
import Testing

private func rejected(_ status: Int, code: String? = nil, retryAfter: String? = nil) -> SendFailure {
    .rejected(SendFailure.Rejection(httpStatus: status, status: nil, errorCode: code, message: nil, retryAfter: retryAfter))
}

private let policy = RetryPolicy(baseDelay: .seconds(1), maximumDelay: .seconds(30), quotaDelay: .seconds(60))

// MARK: Tests

@Test(arguments: [400, 403, 404])
func clientErrorsAreNeverRetried(status: Int) {
    #expect(policy.decision(after: rejected(status, code: "INVALID_ARGUMENT"), attempt: 1) == .permanent)
}

@Test func thirdPartyAuthAndARepeated401AreNeverRetried() {
    #expect(policy.decision(after: rejected(401, code: "THIRD_PARTY_AUTH_ERROR"), attempt: 1) == .permanent)
    #expect(policy.decision(after: rejected(401), attempt: 1) == .permanent)  // the sender already refreshed once
}

@Test func unavailableBacksOffWithFullJitterCapped() {
    #expect(policy.decision(after: rejected(503), attempt: 1, random: { 1 }) == .retry(after: .seconds(1)))
    #expect(policy.decision(after: rejected(500), attempt: 3, random: { 1 }) == .retry(after: .seconds(4)))
    #expect(policy.decision(after: rejected(503), attempt: 3, random: { 0.5 }) == .retry(after: .seconds(2)))
    #expect(policy.decision(after: rejected(503), attempt: 10, random: { 1 }) == .retry(after: .seconds(30)))
    #expect(policy.decision(after: .transport("reset"), attempt: 2, random: { 1 }) == .retry(after: .seconds(2)))
}

@Test func retryAfterIsNeverUndercut() {
    #expect(policy.decision(after: rejected(503, retryAfter: "7"), attempt: 1, random: { 0 }) == .retry(after: .seconds(7)))
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let date = "Fri, 15 Jan 2027 08:00:10 GMT"  // 1_800_000_010
    #expect(RetryPolicy.retryAfter(date, now: now) == .seconds(10))
    #expect(policy.decision(after: rejected(503, retryAfter: date), attempt: 1, now: now, random: { 0 }) == .retry(after: .seconds(10)))
    #expect(RetryPolicy.retryAfter("soon") == nil)
}

@Test func quotaErrorsWaitAtLeastTheQuotaDelayAndGrow() {
    let roomy = RetryPolicy(maximumDelay: .seconds(300), quotaDelay: .seconds(60))
    #expect(roomy.decision(after: rejected(429, code: "QUOTA_EXCEEDED"), attempt: 1) == .retry(after: .seconds(60)))
    #expect(roomy.decision(after: rejected(429), attempt: 2) == .retry(after: .seconds(120)))
    #expect(roomy.decision(after: rejected(429), attempt: 9) == .retry(after: .seconds(300)))
    #expect(roomy.decision(after: rejected(429, retryAfter: "600"), attempt: 1) == .retry(after: .seconds(600)))
    // A cap below the quota delay never shortens it.
    #expect(policy.decision(after: rejected(429), attempt: 3) == .retry(after: .seconds(60)))
}

@Test func tokenEndpointFailuresRetryUnlessTheKeyIsRefused() {
    #expect(policy.decision(after: .credentials("invalid_grant", status: 400), attempt: 1) == .permanent)
    #expect(policy.decision(after: .credentials("unavailable", status: 503), attempt: 1, random: { 1 }) == .retry(after: .seconds(1)))
    #expect(policy.decision(after: .credentials("connection refused", status: nil), attempt: 1, random: { 1 }) == .retry(after: .seconds(1)))
}

@Test func hugeRetryAfterValuesAreClampedToADay() {
    let day = Duration.seconds(RetryPolicy.maximumRetryAfterSeconds)
    #expect(RetryPolicy.retryAfter("9223372036854775807") == day)
    #expect(RetryPolicy.retryAfter("99999999999999999999999") == nil)  // not a number Swift can hold: unreadable
    #expect(RetryPolicy.retryAfter("Fri, 31 Dec 9999 23:59:59 GMT") == day)
    #expect(RetryPolicy.retryAfter("-5") == nil)
    #expect(policy.decision(after: rejected(429, retryAfter: "9223372036854775807"), attempt: 40, random: { 1 }) == .retry(after: day))
}
