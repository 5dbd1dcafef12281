import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import LoadChart
import Logging
import RelayCore

/// The fetch-load chart of a publish, for given devices, shards and spread.
extension ConsoleRoutes {
    /// The chart for a page's settings; the problem when they do not make one.
    static func chart(settings query: Parameters) -> Result<FetchLoadChart, ChartSettingsError> {
        func number(_ name: String, _ fallback: Double, _ range: ClosedRange<Double>) -> Double? {
            guard let text = query.get(name), !text.isEmpty else { return fallback }
            guard let value = Double(text), range.contains(value) else { return nil }
            return value
        }
        guard let devices = number("devices", 1_000_000, 1...1e10), let shards = number("shards", 1, 1...1000),
            let spread = number("spread", 0, 0...86_400), let delay = number("delay", 0, 0...86_400),
            let delivery = number("delivery", 10, 0...3600), let limit = number("limit", 0, 0...1e12)
        else {
            return .failure(
                ChartSettingsError(
                    problem:
                        "Devices 1 to 10,000,000,000, shards 1 to 1000, seconds 0 to 86,400 (FCM delivery to 3,600), a limit of 0 (none) or more fetches/s."
                ))
        }
        let model = FetchLoadModel(devices: devices, shards: Int(shards), spread: spread, clientDelay: delay, delivery: delivery)
        if let problem = model.problem { return .failure(ChartSettingsError(problem: problem)) }
        return .success(FetchLoadChart(model: model, limit: limit > 0 ? limit : nil))
    }

    struct ChartSettingsError: Error {
        var problem: String
    }

    static func chart(_ query: Parameters) -> [String: Any] {
        var context: [String: Any] = [
            "devices": query.get("devices") ?? "1000000", "shards": query.get("shards") ?? "1", "spread": query.get("spread") ?? "0",
            "delay": query.get("delay") ?? "0", "delivery": query.get("delivery") ?? "10", "limit": query.get("limit") ?? "",
        ]
        switch chart(settings: query) {
        case .failure(let error):
            context["problem"] = error.problem
        case .success(let chart):
            let model = chart.model
            var items = URLComponents()
            items.queryItems = ["devices", "shards", "spread", "delay", "delivery", "limit"].compactMap { name in
                query.get(name).map { URLQueryItem(name: name, value: $0) }
            }
            let query = items.percentEncodedQuery.map { "?" + $0 } ?? ""
            context["image"] = "/console/chart.svg" + query
            context["png"] = "/console/chart.png" + query
            let compared = FetchLoadChart.compared(model)
            context["peaks"] = compared.map { name, series -> [String: Any] in
                let peak = series.peak
                return [
                    "name": name, "peak": FetchLoadChart.number(peak.rate), "at": FetchLoadChart.number(peak.at),
                    "end": FetchLoadChart.number(series.end),
                ]
            }
            context["summary"] = "peak \(FetchLoadChart.number(model.peak.rate)) fetches per second as set"
            context["overLimit"] = chart.limitSentence ?? ""
        }
        return context
    }
}
