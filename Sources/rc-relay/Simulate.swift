import ArgumentParser
import Foundation
import RelayCore

/// `rc-relay simulate`: the expected Remote Config fetch rate after a publish, with and without staged waves and a
/// client-side delay, drawn as an SVG chart and summed up in text (docs/waves.md has the model).
struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Chart the expected device fetch rate after a publish, to choose waves and client delay before a launch.")

    @Option(help: "Devices subscribed to the route's topic.")
    var devices: Double = 1_000_000

    @Option(help: "Shard topics the audience is split over (1: no waves).")
    var shards: Int = 1

    @Option(help: "Seconds over which the shards are pinged, evenly.")
    var spread: Double = 0

    @Option(name: .customLong("client-delay"), help: "Most seconds an app waits, at random, before it fetches.")
    var clientDelay: Double = 0

    @Option(help: "Seconds FCM takes to deliver a topic ping to every device (the fan-out), assumed uniform.")
    var delivery: Double = 10

    @Option(help: "The SVG file to write.")
    var out: String = "fetch-load.svg"

    func run() throws {
        let model = FetchLoadModel(devices: devices, shards: shards, spread: spread, clientDelay: clientDelay, delivery: delivery)
        if let problem = model.problem { throw ValidationError(problem) }
        let compared = [
            ("as set", model),
            ("no waves", FetchLoadModel(devices: devices, clientDelay: clientDelay, delivery: delivery)),
            ("all at once", FetchLoadModel(devices: devices, delivery: delivery)),
        ]
        let svg = FetchLoadChart(series: compared.map { ($0.0, $0.1) }).svg()
        do {
            try Data(svg.utf8).write(to: URL(fileURLWithPath: out), options: .atomic)
        } catch {
            throw ValidationError("cannot write \(out): \(error.localizedDescription)")
        }
        print(
            "\(Self.number(devices)) devices, \(shards) shard(s) over \(Self.number(spread)) s, client delay up to \(Self.number(clientDelay)) s, "
                + "FCM delivery over \(Self.number(delivery)) s")
        for (name, series) in compared {
            let peak = series.peak
            print("peak \(name): \(Self.number(peak.rate)) fetches/s at \(Self.number(peak.at)) s; all fetched by \(Self.number(series.end)) s")
        }
        print("chart: \(out)")
    }

    /// A number as people read it: grouped thousands, at most one decimal.
    static func number(_ value: Double) -> String {
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

/// A plain SVG line chart of fetches per second over time, one line per series.
struct FetchLoadChart {
    let series: [(name: String, model: FetchLoadModel)]
    let width = 800.0
    let height = 420.0
    let margin = 70.0
    static let colours = ["#1a73e8", "#e8710a", "#9aa0a6"]

    func svg() -> String {
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
            <text x="\(width / 2)" y="\(height - 20)" text-anchor="middle">seconds after the publish (0 to \(Simulate.number(end)))</text>
            <text x="\(margin)" y="\(margin - 12)" text-anchor="start">fetches per second (top: \(Simulate.number(top)))</text>

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
                <text x="\(width - margin - 150)" y="\(margin + 18 * Double(index))" fill="\(colour)">\(name): peak \(Simulate.number(model.peak.rate))/s</text>

                """
        }
        return out + "</svg>\n"
    }

    static func format(_ value: Double) -> String { String(format: "%.2f", value) }
}
