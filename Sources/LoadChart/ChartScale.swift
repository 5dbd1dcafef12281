import Foundation

/// A linear axis from 0 with round-number ticks: steps of 1, 2, 2.5 or 5 times a power of ten, about five of them, the
/// axis ending at the first tick at or past the largest value (so the data fills most of the axis).
public struct ChartScale: Sendable, Equatable {
    public let step: Double
    public let top: Double

    public init(covering maximum: Double, ticks: Int = 5) {
        let largest = maximum > 0 && maximum.isFinite ? maximum : 1
        let raw = largest / Double(max(ticks, 1))
        let magnitude = pow(10, (log10(raw)).rounded(.down))
        step = [1, 2, 2.5, 5, 10].lazy.map { $0 * magnitude }.first { $0 >= raw * (1 - 1e-9) } ?? 10 * magnitude
        top = (largest / step * (1 - 1e-12)).rounded(.up) * step
    }

    /// The tick values, 0 to ``top``.
    public var ticks: [Double] { (0...Int((top / step).rounded())).map { Double($0) * step } }

    /// Where `value` falls along an axis of `length`, from 0 (at 0) to `length` (at ``top``).
    public func position(_ value: Double, length: Double) -> Double { value / top * length }
}

/// A logarithmic axis of whole decades, for lines whose peaks differ by orders of magnitude.
public struct LogScale: Sendable, Equatable {
    /// The lowest and highest power of ten shown.
    public let low: Int
    public let high: Int

    /// Decades from one below the smallest peak's to the largest peak's (rounded up).
    public init(peaks: [Double]) {
        let positive = peaks.filter { $0 > 0 && $0.isFinite }
        let smallest = positive.min() ?? 1
        let largest = positive.max() ?? 10
        low = Int(log10(smallest).rounded(.down)) - 1
        high = max(Int(log10(largest).rounded(.up)), low + 1)
    }

    public var ticks: [Double] { (low...high).map { pow(10, Double($0)) } }

    /// Where `value` falls along an axis of `length`; values at or under the lowest decade sit on the axis.
    public func position(_ value: Double, length: Double) -> Double {
        guard value > pow(10, Double(low)) else { return 0 }
        return (log10(value) - Double(low)) / Double(high - low) * length
    }
}

/// How a duration reads on the time axis: seconds, minutes or hours, whichever keeps the numbers small.
public struct TimeUnit: Sendable, Equatable {
    public let name: String
    public let seconds: Double

    public init(spanning end: Double) {
        if end <= 600 {
            (name, seconds) = ("s", 1)
        } else if end <= 3 * 3600 {
            (name, seconds) = ("min", 60)
        } else {
            (name, seconds) = ("h", 3600)
        }
    }
}
