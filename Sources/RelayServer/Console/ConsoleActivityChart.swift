import DeliveryEngine
import Foundation
import LoadChart
import RelayCore

/// The overview's picture of the last 24 hours: pings per hour as bars stacked by outcome, each publish marked under
/// the axis where it arrived. Drawn here as SVG, inline in the page: no script, no request of its own.
struct ConsoleActivityChart {
    /// The outcomes a bar is stacked from, bottom up, with their colours and the statuses each counts.
    static let outcomes: [(name: String, colour: String, statuses: Set<String>)] = [
        ("accepted", "#188038", ["accepted", "validated"]),
        ("refused or dead", "#d93025", ["failed", "dead"]),
        ("waiting", "#f29900", ["pending", "interrupted"]),
        ("superseded", "#9aa0a6", ["superseded"]),
    ]
    static let (width, height) = (760.0, 230.0)
    static let (left, right, top, bottom) = (56.0, 744.0, 16.0, 176.0)

    /// Pings per hour by outcome: 24 hours, the last ending now.
    let counts: [[Int]]
    /// When each publish (project and version) first arrived within the 24 hours, and what it was.
    let publishes: [(at: Date, label: String)]
    let now: Date

    init(entries: [DeliveryHistory.Entry], now: Date = Date()) {
        self.now = now
        let start = now.addingTimeInterval(-24 * 3600)
        var counts = Array(repeating: Array(repeating: 0, count: Self.outcomes.count), count: 24)
        var firsts: [String: (at: Date, label: String)] = [:]
        for entry in entries where entry.receivedAt > start && entry.receivedAt <= now && !entry.toDevice && entry.origin != .send {
            let hour = min(23, Int(entry.receivedAt.timeIntervalSince(start) / 3600))
            let status = ConsoleRoutes.status(entry)
            if let outcome = Self.outcomes.firstIndex(where: { $0.statuses.contains(status) }) { counts[hour][outcome] += 1 }
            let key = "\(entry.project)/\(entry.version.versionNumber)"
            if firsts[key].map({ entry.receivedAt < $0.at }) ?? true {
                firsts[key] = (entry.receivedAt, "version \(entry.version.versionNumber) of \(entry.project)")
            }
        }
        self.counts = counts
        publishes = firsts.values.sorted { $0.at < $1.at }
    }

    var total: Int { counts.joined().reduce(0, +) }

    func svg() -> String {
        let scale = ChartScale(covering: Double(max(counts.map { $0.reduce(0, +) }.max() ?? 0, 1)), ticks: 4)
        let slot = (Self.right - Self.left) / 24
        func y(_ value: Double) -> Double { Self.bottom - scale.position(value, length: Self.bottom - Self.top) }
        var out = """
            <svg class="activity" xmlns="http://www.w3.org/2000/svg" width="\(Int(Self.width))" height="\(Int(Self.height))" viewBox="0 0 \(Int(Self.width)) \(Int(Self.height))" role="img" aria-labelledby="activity-title" font-family="sans-serif" font-size="12">
            <title id="activity-title">Pings per hour over the last 24 hours, by outcome: \(total) in all; \(publishes.count) publish(es) marked</title>

            """
        for tick in scale.ticks {
            out += "<line x1=\"\(Self.left)\" y1=\"\(f(y(tick)))\" x2=\"\(Self.right)\" y2=\"\(f(y(tick)))\" stroke=\"#e0e0e0\"/>"
            out += "<text class=\"y-tick\" x=\"\(Self.left - 6)\" y=\"\(f(y(tick) + 4))\" text-anchor=\"end\">\(Int(tick))</text>\n"
        }
        for (hour, stack) in counts.enumerated() {
            var base = 0
            for (index, count) in stack.enumerated() where count > 0 {
                let outcome = Self.outcomes[index]
                let (from, to) = (y(Double(base)), y(Double(base + count)))
                out +=
                    "<rect class=\"bar\" data-outcome=\"\(outcome.name)\" data-count=\"\(count)\" x=\"\(f(Self.left + Double(hour) * slot + 2))\" y=\"\(f(to))\" width=\"\(f(slot - 4))\" height=\"\(f(from - to))\" fill=\"\(outcome.colour)\"><title>\(count) \(outcome.name)</title></rect>\n"
                base += count
            }
        }
        for hour in stride(from: 0, through: 24, by: 4) {
            let x = Self.left + Double(hour) * slot
            let label = hour == 24 ? "now" : "−\(24 - hour) h"
            out += "<text x=\"\(f(x))\" y=\"\(Self.bottom + 16)\" text-anchor=\"middle\">\(label)</text>\n"
        }
        for publish in publishes {
            let x = Self.left + publish.at.timeIntervalSince(now.addingTimeInterval(-24 * 3600)) / 3600 * slot
            out +=
                "<path class=\"publish\" d=\"M\(f(x)) \(Self.bottom + 22) l-5 9 h10 z\" fill=\"#202124\"><title>\(Self.escape(publish.label))</title></path>\n"
        }
        out += "<line x1=\"\(Self.left)\" y1=\"\(Self.bottom)\" x2=\"\(Self.right)\" y2=\"\(Self.bottom)\" stroke=\"#5f6368\"/>\n"
        for (index, outcome) in Self.outcomes.enumerated() {
            let x = Self.left + Double(index) * 150
            out += "<rect x=\"\(f(x))\" y=\"\(Self.height - 14)\" width=\"10\" height=\"10\" fill=\"\(outcome.colour)\"/>"
            out += "<text x=\"\(f(x + 14))\" y=\"\(Self.height - 5)\">\(outcome.name)</text>\n"
        }
        out +=
            "<path d=\"M\(f(Self.left + 610)) \(Self.height - 14) l-5 9 h10 z\" fill=\"#202124\"/><text x=\"\(f(Self.left + 620))\" y=\"\(Self.height - 5)\">a publish</text>\n"
        return out + "</svg>"
    }

    private func f(_ value: Double) -> String { String(format: "%.1f", value) }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
