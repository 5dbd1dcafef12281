import Foundation

/// What to do after a failed send, and how long to wait first, for a failure its sender classified
/// (``SendFailure/Kind``): the sender's rules decide what is permanent, this decides how long to wait.
///
/// A permanent failure is never retried; a throttled one waits at least `quotaDelay` and grows from there; a transient
/// one backs off exponentially with full jitter, capped at `maximumDelay`. A `Retry-After` (seconds or HTTP date,
/// read by the sender with ``retryAfter(_:now:)``) is never undercut. Attempts and total time are bounded.
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
        /// Never retry: the destination would refuse the same request again.
        case permanent
    }

    /// The decision after `attempt` (1-based) failed with `error`; `random` draws the jitter in 0...1.
    public func decision(after error: SendFailure, attempt: Int, random: () -> Double = { Double.random(in: 0...1) }) -> Decision {
        let asked = error.retryAfter ?? .zero
        switch error.kind {
        case .throttled:
            let growth = quotaDelay * (1 << min(attempt - 1, 16))
            return .retry(after: max(min(growth, max(maximumDelay, quotaDelay)), asked))
        case .transient:
            return .retry(after: max(jittered(attempt, random: random), asked))
        case .permanent, .withheld:
            return .permanent  // a withheld send: the engine stands the ping down before it asks (Dispatcher)
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
