import DeliveryEngine
import FCMClient
import Foundation
import RelayCore

/// The `delivery` section: retries, the outbound limit, the answer's wait, the spool and deduplication.
extension ConfigurationLoader {
    func resolveRetryPolicy(_ delivery: ConfigurationFile.Delivery?) throws(ConfigurationError) -> RetryPolicy {
        let defaults = RetryPolicy()
        let attempts = delivery?.maxAttempts ?? defaults.maximumAttempts
        guard (1...100).contains(attempts) else {
            throw ConfigurationError(key: "delivery.maxAttempts", problem: "\(attempts) is outside 1 to 100", fix: "use \(defaults.maximumAttempts)")
        }
        func seconds(_ value: Double?, _ key: String, _ fallback: Duration, _ range: ClosedRange<Double>) throws(ConfigurationError) -> Duration {
            guard let value else { return fallback }
            guard range.contains(value) else {
                throw ConfigurationError(
                    key: "delivery.\(key)", problem: "\(value) is outside \(range.lowerBound) to \(range.upperBound) seconds",
                    fix: "use \(fallback.components.seconds)")
            }
            return .milliseconds(Int(value * 1000))
        }
        return RetryPolicy(
            maximumAttempts: attempts,
            deadline: try seconds(delivery?.deadlineSeconds, "deadlineSeconds", defaults.deadline, 0.1...86_400),
            baseDelay: try seconds(delivery?.baseDelaySeconds, "baseDelaySeconds", defaults.baseDelay, 0.001...600),
            maximumDelay: try seconds(delivery?.maxDelaySeconds, "maxDelaySeconds", defaults.maximumDelay, 0.001...3600),
            quotaDelay: try seconds(delivery?.quotaDelaySeconds, "quotaDelaySeconds", defaults.quotaDelay, 0.001...3600))
    }

    func duration(_ value: Double?, key: String, default fallback: Double, range: ClosedRange<Double>) throws(ConfigurationError) -> Duration {
        let seconds = value ?? fallback
        guard range.contains(seconds) else {
            throw ConfigurationError(
                key: key, problem: "\(seconds) is outside \(range.lowerBound) to \(range.upperBound) seconds", fix: "use \(fallback)")
        }
        return .milliseconds(Int(seconds * 1000))
    }

    func dedupMaxEvents(_ delivery: ConfigurationFile.Delivery?) throws(ConfigurationError) -> Int {
        let count = delivery?.dedupMaxEvents ?? 1_000
        guard (0...1_000_000).contains(count) else {
            throw ConfigurationError(key: "delivery.dedupMaxEvents", problem: "\(count) is outside 0 to 1000000", fix: "use 1000 (about 1.6 MB)")
        }
        return count
    }

    func resolvePace(_ delivery: ConfigurationFile.Delivery?) throws(ConfigurationError) -> Double {
        let pace = delivery?.messagesPerSecond ?? 1_000
        guard (1...10_000).contains(pace) else {
            throw ConfigurationError(
                key: "delivery.messagesPerSecond", problem: "\(pace) is outside 1 to 10000",
                fix: "use 1000; FCM's quota is 600,000 messages a minute (10,000 a second) per project")
        }
        return pace
    }

    func resolveConcurrency(_ delivery: ConfigurationFile.Delivery?) throws(ConfigurationError) -> Int {
        let concurrency = delivery?.concurrency ?? 64
        guard (1...1000).contains(concurrency) else {
            throw ConfigurationError(
                key: "delivery.concurrency", problem: "\(concurrency) is outside 1 to 1000",
                fix: "use 64; FCM allows at most 1000 concurrent topic fan-outs per project")
        }
        return concurrency
    }
}
