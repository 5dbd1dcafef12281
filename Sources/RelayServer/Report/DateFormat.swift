import Foundation
import OpenAPIRuntime

/// RFC 3339 dates in UTC with milliseconds (`2026-11-21T09:14:03.912Z`) for the API's answers, written by hand:
/// every webhook answer carries a few, and a date formatter costs more than the rest of the answer.
struct DateFormat: DateTranscoder {
    func encode(_ date: Date) throws -> String { Self.string(date) }

    func decode(_ text: String) throws -> Date {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try Date.ISO8601FormatStyle().parse(text)
    }

    /// Milliseconds truncated, as Foundation's `ISO8601FormatStyle` writes them.
    static func string(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        let seconds = interval.rounded(.down)
        let milliseconds = min(999, Int((interval - seconds) * 1000))
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        LineLogHandler.appendTimestamp(seconds: Int(seconds), milliseconds: milliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
