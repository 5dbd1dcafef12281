import ArgumentParser
import Foundation
import LoadChart

/// `rc-relay simulate`: the expected Remote Config fetch rate after a publish, with and without staged waves and a
/// client-side delay, drawn as a chart (SVG or PNG) and summed up in text (docs/waves.md has the model).
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

    @Option(help: "A fetch rate your backend should stay under, per second: drawn as a line, the time above it shaded.")
    var limit: Double?

    @Option(help: "The chart file to write: SVG, or PNG when its name ends in .png.")
    var out: String = "fetch-load.svg"

    func run() throws {
        let model = FetchLoadModel(devices: devices, shards: shards, spread: spread, clientDelay: clientDelay, delivery: delivery)
        if let problem = model.problem { throw ValidationError(problem) }
        if let limit, !(limit > 0 && limit <= 1e12) { throw ValidationError("limit must be more than 0 and at most 1,000,000,000,000 fetches/s") }
        let chart = FetchLoadChart(model: model, limit: limit)
        do {
            let bytes = out.lowercased().hasSuffix(".png") ? Data(chart.png()) : Data(chart.svg().utf8)
            try bytes.write(to: URL(fileURLWithPath: out), options: .atomic)
        } catch {
            throw ValidationError("cannot write \(out): \(error.localizedDescription)")
        }
        print(chart.title)
        for (name, series) in FetchLoadChart.compared(model) {
            let peak = series.peak
            print(
                "peak \(name): \(FetchLoadChart.number(peak.rate)) fetches/s at \(FetchLoadChart.number(peak.at)) s; all fetched by \(FetchLoadChart.number(series.end)) s"
            )
        }
        if let sentence = chart.limitSentence { print(sentence) }
        print("chart: \(out)")
    }
}
