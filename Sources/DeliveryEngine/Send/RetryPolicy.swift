import Foundation

/// FCM's retry rules: what to do after a failed send, and how long to wait first.
///
/// 400, 403, 404 and third-party auth errors are permanent; 429 waits at least `quotaDelay` (FCM asks for a minute)
/// and grows from there; 5xx, timeouts and connection errors back off exponentially with full jitter, capped at
/// `maximumDelay`. A `Retry-After` (seconds or HTTP date) is never undercut. Attempts and total time are bounded.
public struct RetryPolicy: Sendable, Equatable {
    public var maximumAttempts: Int
    public var deadline: Duration
    public var baseDelay: Duration
    public var maximumDelay: Duration
    public var quotaDelay: Duration

    public init(
        maximumAttempts: Int = 8, deadline: Duration = .seconds(900), baseDelay: Duration = .seconds(1),
        maximumDelay: Duration = .seconds(300), quotaDelay: Duration = .seconds(60)
    ) {
        self.maximumAttempts = maximumAttempts
        self.deadline = deadline
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
        self.quotaDelay = quotaDelay
    }

    /// What to do after a failure.
    public enum Decision: Sendable, Equatable {
        /// Try again after this long.
        case retry(after: Duration)
        /// Never retry: FCM will refuse the same request again.
        case permanent
    }

    /// The decision after `attempt` (1-based) failed with `error`; `random` draws the jitter in 0...1.
    public func decision(
        after error: SendFailure, attempt: Int, now: Date = Date(), random: () -> Double = { Double.random(in: 0...1) }
    ) -> Decision {
        switch error {
        case .rejected(let response):
            switch response.httpStatus {
            case 429:
                let growth = quotaDelay * (1 << min(attempt - 1, 16))
                return .retry(after: max(min(growth, max(maximumDelay, quotaDelay)), Self.retryAfter(response.retryAfter, now: now) ?? .zero))
            case 408, 500...599:
                return .retry(after: max(jittered(attempt, random: random), Self.retryAfter(response.retryAfter, now: now) ?? .zero))
            default:
                return .permanent  // 400, 401 after a refresh, 403, 404, THIRD_PARTY_AUTH_ERROR
            }
        case .credentials(_, let status?) where status != 408 && status != 429 && status < 500:
            return .permanent  // the key itself is refused: retrying cannot help
        case .credentials, .transport, .invalidResponse:
            return .retry(after: jittered(attempt, random: random))
        case .withheld:
            return .permanent  // the engine stands the ping down before it asks (Dispatcher)
        }
    }

    /// Full jitter: uniform in 0 ... min(maximumDelay, baseDelay × 2^(attempt−1)).
    func jittered(_ attempt: Int, random: () -> Double) -> Duration {
        let ceiling = min(maximumDelay, baseDelay * (1 << min(attempt - 1, 30)))
        return ceiling * random()
    }

    /// The longest `Retry-After` believed (a day).
    public static let maximumRetryAfterSeconds = 86_400

    /// `Retry-After` as delta-seconds or an HTTP date (RFC 9110); nil when absent or unreadable.
    public static func retryAfter(_ value: String?, now: Date = Date()) -> Duration? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        // A day at most, whatever the upstream asks: the delivery deadline ends a ping long before that anyway.
        if let seconds = Int(value), seconds >= 0 { return .seconds(min(seconds, maximumRetryAfterSeconds)) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        let milliseconds = min(max(0, date.timeIntervalSince(now) * 1000), Double(maximumRetryAfterSeconds) * 1000)
        return .milliseconds(Int(milliseconds))
    }
}
