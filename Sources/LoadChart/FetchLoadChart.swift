import Foundation

/// The fetch-load chart of `rc-relay simulate` and the console: the settings given as the main line, on a scale of
/// its own with round-number ticks; a backend limit (when given) as a line, the time above it shaded and stated; and,
/// in a panel beside it on a logarithmic scale, the same publish without waves and all at once, which would otherwise
/// flatten the main line against the axis.
public struct FetchLoadChart: Sendable {
    public let model: FetchLoadModel
    /// A fetch rate the app's backend (or its Remote Config budget) should stay under, per second; nil: none given.
    public let limit: Double?

    public init(model: FetchLoadModel, limit: Double? = nil) {
        self.model = model
        self.limit = limit
    }

    /// The three lines compared: the settings given, the same client delay without waves, and every device at once.
    public static func compared(_ model: FetchLoadModel) -> [(name: String, model: FetchLoadModel)] {
        [
            ("as set", model),
            ("no waves", FetchLoadModel(devices: model.devices, clientDelay: model.clientDelay, delivery: model.delivery)),
            ("all at once", FetchLoadModel(devices: model.devices, delivery: model.delivery)),
        ]
    }

    /// The settings in words, the chart's title and the first line `rc-relay simulate` prints.
    public var title: String {
        "\(Self.number(model.devices)) devices, \(model.shards) shard(s) over \(Self.number(model.spread)) s, "
            + "client delay up to \(Self.number(model.clientDelay)) s, FCM delivery over \(Self.number(model.delivery)) s"
    }

    /// The main scale: the main line's peak, and the limit too when it is near enough to be read against it (up to
    /// 1.5 times the peak); a limit far above is stated instead, so it never flattens the line.
    public var scale: ChartScale {
        let peak = model.peak.rate
        guard let limit, limit <= peak * 1.5 else { return ChartScale(covering: peak) }
        return ChartScale(covering: max(peak, limit * 1.05))  // the limit's line below the frame, not on it
    }

    public var timeUnit: TimeUnit { TimeUnit(spanning: model.end) }

    /// The time axis, in ``timeUnit``s.
    public var timeScale: ChartScale { ChartScale(covering: model.end / timeUnit.seconds) }

    /// What the limit comes to: the spans above it and their total length, in seconds.
    public var overLimit: (spans: [(from: Double, to: Double)], seconds: Double)? {
        guard let limit else { return nil }
        let spans = model.spans(above: limit)
        return (spans, spans.reduce(0) { $0 + $1.to - $1.from })
    }

    /// The sentence under the chart about the limit, or nil without one.
    public var limitSentence: String? {
        guard let limit, let over = overLimit else { return nil }
        let name = "the limit of \(Self.number(limit)) fetches/s"
        guard let first = over.spans.first, let last = over.spans.last else {
            return "Never above \(name): the peak is \(Self.number(model.peak.rate)) fetches/s."
        }
        return "Above \(name) for \(Self.number(over.seconds)) s in all, from \(Self.number(first.from)) s to \(Self.number(last.to)) s."
    }

    /// Remote Config's own throttling, as the chart states it: it is per app instance, so no fleet-wide line exists.
    public static let throttlingNote =
        "Remote Config throttles each app instance, not the fleet (5 fetches an hour in developer mode on older SDKs): a ping asks each device for one fetch."

    /// A number as people read it: grouped thousands, at most one decimal.
    public static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        formatter.maximumFractionDigits = 1
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.usesGroupingSeparator = true
        formatter.groupingSeparator = ","
        formatter.groupingSize = 3
        return formatter.string(from: NSNumber(value: rounded)) ?? String(rounded)
    }
}
