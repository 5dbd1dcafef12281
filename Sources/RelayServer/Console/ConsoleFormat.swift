import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// How the pages show statuses and times.
extension ConsoleRoutes {
    static func status(_ entry: DeliveryHistory.Entry) -> String { entry.report?.status.rawValue ?? "pending" }

    static func retryable(_ entry: DeliveryHistory.Entry) -> Bool {
        guard let status = entry.report?.status else { return false }
        return (status == .dead || status == .failed) && !entry.toDevice
    }

    static func waiting(_ entry: DeliveryHistory.Entry) -> String {
        guard let reason = entry.waitingFor else { return "" }
        return entry.waitingUntil.map { "\(reason) until \(when($0))" } ?? reason
    }

    /// `2026-11-25 04:14:40 UTC (3 min ago)`.
    static func when(_ date: Date, now: Date = Date()) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let stamp = String(format: "%04d-%02d-%02d %02d:%02d:%02d UTC", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
        return "\(stamp) (\(relative(date, now: now)))"
    }

    static func relative(_ date: Date, now: Date) -> String {
        let seconds = Int(now.timeIntervalSince(date).rounded())
        let magnitude = abs(seconds)
        let text: String
        switch magnitude {
        case ..<5: return "just now"
        case ..<60: text = "\(magnitude) s"
        case ..<3600: text = "\(magnitude / 60) min"
        case ..<86_400: text = "\(magnitude / 3600) h"
        default: text = "\(magnitude / 86_400) d"
        }
        return seconds >= 0 ? "\(text) ago" : "in \(text)"
    }
}
