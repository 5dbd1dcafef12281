import Foundation
import Logging
import RelayCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One JSON object per line: `ts`, `level`, `msg`, `logger`, then the metadata as fields in key order.
///
/// Written by hand rather than through `JSONSerialization` and a date formatter: every webhook logs a few lines, and
/// those two were a measurable share of its CPU (see docs/performance.md).
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    let label: String
    let output: FileHandle

    public init(label: String, level: Logger.Level = .info, output: FileHandle = .standardOutput) {
        self.label = label
        self.logLevel = level
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: #"{"ts":""#.utf8)
        Self.appendTimestamp(to: &line)
        line.append(contentsOf: #"","level":"#.utf8)
        JSONBytes.appendString(event.level.rawValue, to: &line)
        line.append(contentsOf: #","msg":"#.utf8)
        JSONBytes.appendString(event.message.description, to: &line)
        line.append(contentsOf: #","logger":"#.utf8)
        JSONBytes.appendString(label, to: &line)
        var fields = metadata
        if let extra = event.metadata, !extra.isEmpty { fields.merge(extra) { $1 } }
        for key in fields.keys.sorted() where !Self.reserved.contains(key) {
            line.append(UInt8(ascii: ","))
            JSONBytes.appendString(key, to: &line)
            line.append(UInt8(ascii: ":"))
            JSONBytes.appendString(fields[key]!.description, to: &line)
        }
        line.append(contentsOf: "}\n".utf8)
        output.write(Data(line))
    }

    private static let reserved: Set<String> = ["ts", "level", "msg", "logger"]

    /// Now, in RFC 3339 in UTC with milliseconds: `2026-11-23T09:55:03.123Z`.
    static func appendTimestamp(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        appendTimestamp(seconds: now.tv_sec, milliseconds: Int(now.tv_nsec) / 1_000_000, to: &line)
    }

    /// A time in RFC 3339 in UTC with milliseconds.
    static func appendTimestamp(seconds: Int, milliseconds: Int, to line: inout [UInt8]) {
        var seconds = seconds
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var value = value
            while divisor > 0 {
                line.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                value %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        line.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        line.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        line.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        line.append(UInt8(ascii: "."))
        digits(milliseconds, 3)
        line.append(UInt8(ascii: "Z"))
    }
}
