import DeliveryEngine
import Foundation
import Testing

/// The engine's waits for a failure its sender classified (FCM's own rules, which classify, are RelayServer's:
/// `FCMRulesTests`).
private func failure(_ kind: SendFailure.Kind, retryAfter: Duration? = nil) -> SendFailure {
    SendFailure(kind, "a destination's answer", retryAfter: retryAfter)
}

private let policy = RetryPolicy(baseDelay: .seconds(1), maximumDelay: .seconds(30), quotaDelay: .seconds(60))

// MARK: Tests

@Test func aPermanentOrWithheldFailureIsNeverRetried() {
    #expect(policy.decision(after: failure(.permanent), attempt: 1) == .permanent)
    #expect(policy.decision(after: failure(.permanent, retryAfter: .seconds(1)), attempt: 1) == .permanent)
    #expect(policy.decision(after: .withheld("the lease moved"), attempt: 1) == .permanent)
}

@Test func aTransientFailureBacksOffWithFullJitterCapped() {
    #expect(policy.decision(after: failure(.transient), attempt: 1, random: { 1 }) == .retry(after: .seconds(1)))
    #expect(policy.decision(after: failure(.transient), attempt: 3, random: { 1 }) == .retry(after: .seconds(4)))
    #expect(policy.decision(after: failure(.transient), attempt: 3, random: { 0.5 }) == .retry(after: .seconds(2)))
    #expect(policy.decision(after: failure(.transient), attempt: 10, random: { 1 }) == .retry(after: .seconds(30)))
}

@Test func retryAfterIsNeverUndercut() {
    #expect(policy.decision(after: failure(.transient, retryAfter: .seconds(7)), attempt: 1, random: { 0 }) == .retry(after: .seconds(7)))
    #expect(policy.decision(after: failure(.throttled, retryAfter: .seconds(600)), attempt: 1) == .retry(after: .seconds(600)))
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    #expect(RetryPolicy.retryAfter("Fri, 15 Jan 2027 08:00:10 GMT", now: now) == .seconds(10))  // 1_800_000_010
    #expect(RetryPolicy.retryAfter(" 7 ") == .seconds(7))
    #expect(RetryPolicy.retryAfter("soon") == nil)
    #expect(RetryPolicy.retryAfter("") == nil)
}

@Test func aThrottledFailureWaitsAtLeastTheQuotaDelayAndGrows() {
    let roomy = RetryPolicy(maximumDelay: .seconds(300), quotaDelay: .seconds(60))
    #expect(roomy.decision(after: failure(.throttled), attempt: 1) == .retry(after: .seconds(60)))
    #expect(roomy.decision(after: failure(.throttled), attempt: 2) == .retry(after: .seconds(120)))
    #expect(roomy.decision(after: failure(.throttled), attempt: 9) == .retry(after: .seconds(300)))
    // A cap below the quota delay never shortens it.
    #expect(policy.decision(after: failure(.throttled), attempt: 3) == .retry(after: .seconds(60)))
}

@Test func hugeRetryAfterValuesAreClampedToADay() {
    let day = Duration.seconds(RetryPolicy.maximumRetryAfterSeconds)
    #expect(RetryPolicy.retryAfter("9223372036854775807") == day)
    #expect(RetryPolicy.retryAfter("99999999999999999999999") == nil)  // not a number Swift can hold: unreadable
    #expect(RetryPolicy.retryAfter("Fri, 31 Dec 9999 23:59:59 GMT") == day)
    #expect(RetryPolicy.retryAfter("-5") == nil)
    #expect(policy.decision(after: failure(.throttled, retryAfter: day), attempt: 40, random: { 1 }) == .retry(after: day))
}
