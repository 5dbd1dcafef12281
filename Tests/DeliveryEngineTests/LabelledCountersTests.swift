import CoreMetrics
import Testing

@testable import DeliveryEngine

/// A counter is made once per label and dimensions, and never shared by two series (issue #35 keyed the cache by the
/// label and dimensions as they are instead of one joined string).
@Test func labelledCountersAreOnePerLabelAndDimensions() {
    let counters = LabelledCounters(factory: NOOPMetricsHandler.instance)
    let series: [(String, [(String, String)])] = [
        ("x_total", []),
        ("x_total", [("a", "")]),
        ("x_total", [("a", "1")]),
        ("x_total", [("a", "1"), ("b", "2")]),
        ("x_total", [("a", "1"), ("b", "3")]),
        ("x_total", [("b", "1"), ("a", "2")]),
        ("x_total", [("a", "1"), ("b", "2"), ("c", "")]),
        ("x_total", [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")]),
        ("x_total", [("a", "1"), ("b", "2"), ("c", "3"), ("d", "5")]),
        ("x_total", [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "")]),
        ("y_total", [("a", "1"), ("b", "2")]),
        ("x_total", [("a=1", "")]),
    ]
    let made = series.map { counters($0.0, $0.1) }
    for (index, (label, dimensions)) in series.enumerated() {
        #expect(counters(label, dimensions) === made[index], "\(label) \(dimensions)")
        for other in made.indices where other != index {
            #expect(made[other] !== made[index], "\(label) \(dimensions) and \(series[other].0) \(series[other].1)")
        }
    }
}
