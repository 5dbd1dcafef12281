import Foundation

/// A plain SVG line chart of fetches per second over time, one line per series.
public struct FetchLoadChart: Sendable {
    public let series: [(name: String, model: FetchLoadModel)]
    let width = 800.0
    let height = 420.0
    let margin = 70.0
    static let colours = ["#1a73e8", "#e8710a", "#9aa0a6"]

    public init(series: [(name: String, model: FetchLoadModel)]) { self.series = series }

    /// The three lines `rc-relay simulate` compares: the settings given, the same client delay without waves, and
    /// every device at once.
    public static func compared(_ model: FetchLoadModel) -> [(name: String, model: FetchLoadModel)] {
        [
            ("as set", model),
            ("no waves", FetchLoadModel(devices: model.devices, clientDelay: model.clientDelay, delivery: model.delivery)),
            ("all at once", FetchLoadModel(devices: model.devices, delivery: model.delivery)),
        ]
    }

    public func svg() -> String {
        let end = series.map(\.model.end).max() ?? 1
        let top = series.map(\.model.peak.rate).max() ?? 1
        let (plotWidth, plotHeight) = (width - 2 * margin, height - 2 * margin)
        func x(_ t: Double) -> Double { margin + t / end * plotWidth }
        func y(_ rate: Double) -> Double { height - margin - rate / top * plotHeight }
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <line x1="\(margin)" y1="\(height - margin)" x2="\(width - margin)" y2="\(height - margin)" stroke="black"/>
            <line x1="\(margin)" y1="\(margin)" x2="\(margin)" y2="\(height - margin)" stroke="black"/>
            <text x="\(width / 2)" y="\(height - 20)" text-anchor="middle">seconds after the publish (0 to \(Self.number(end)))</text>
            <text x="\(margin)" y="\(margin - 12)" text-anchor="start">fetches per second (top: \(Self.number(top)))</text>

            """
        for (index, (name, model)) in series.enumerated() {
            // The rate is piecewise linear: its corners draw it exactly.
            var times: Set<Double> = [0, model.end]
            let (low, high) = (min(model.delivery, model.clientDelay), max(model.delivery, model.clientDelay))
            for k in 0..<model.shards {
                for corner in [0, low, high, low + high] { times.insert(model.sendTime(ofShard: k) + corner) }
            }
            let points = times.sorted().map { t in "\(Self.format(x(t))),\(Self.format(y(model.rate(at: t))))" }
            let colour = Self.colours[index % Self.colours.count]
            out += """
                <polyline data-series="\(name)" data-peak="\(model.peak.rate)" fill="none" stroke="\(colour)" stroke-width="2" points="\(points.joined(separator: " "))"/>
                <text x="\(width - margin - 150)" y="\(margin + 18 * Double(index))" fill="\(colour)">\(name): peak \(Self.number(model.peak.rate))/s</text>

                """
        }
        return out + "</svg>\n"
    }

    static func format(_ value: Double) -> String { String(format: "%.2f", value) }

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
