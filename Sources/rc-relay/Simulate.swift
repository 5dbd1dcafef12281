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
        let compared = FetchLoadChart.compared(model)
        let svg = FetchLoadChart(series: compared).svg()
        do {
            try Data(svg.utf8).write(to: URL(fileURLWithPath: out), options: .atomic)
        } catch {
            throw ValidationError("cannot write \(out): \(error.localizedDescription)")
        }
        print(
            "\(FetchLoadChart.number(devices)) devices, \(shards) shard(s) over \(FetchLoadChart.number(spread)) s, client delay up to \(FetchLoadChart.number(clientDelay)) s, "
                + "FCM delivery over \(FetchLoadChart.number(delivery)) s")
        for (name, series) in compared {
            let peak = series.peak
            print(
                "peak \(name): \(FetchLoadChart.number(peak.rate)) fetches/s at \(FetchLoadChart.number(peak.at)) s; all fetched by \(FetchLoadChart.number(series.end)) s"
            )
        }
        print("chart: \(out)")
    }
}
