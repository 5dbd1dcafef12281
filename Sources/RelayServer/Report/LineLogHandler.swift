import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One line per event, in the configured `log.format`, whatever the event holds:
///
/// - `json`: one JSON object per line: `ts`, `level`, `msg`, `logger`, then the metadata as fields in key order;
/// - `text`: what swift-log's `StreamLogHandler` writes (`2026-11-26T01:36:48+0000 notice rc-relay: key=value …
///   [module] message`), but escaped (``LogText``).
///
/// Every message, key and value, rc-relay's own and the libraries' alike (they log through this handler too), is
/// escaped and bounded by ``LogText``: no input can start a line of its own or make one line kilobytes long (issue #48).
///
/// Written by hand: every webhook logs a few lines, and `JSONSerialization` with a date formatter were a measurable
/// share of its CPU; `StreamLogHandler` sorts and formats the whole metadata again each time one key is set, and
/// rc-relay sets several per request, which was a tenth of a webhook's CPU (docs/performance.md). Here the metadata is
/// formatted once, when a line is written. It is kept as a short array sorted by key, not a dictionary: a request sets
/// a handful of keys, and each line merges them with its own; copying, hashing and merging dictionaries for that was
/// most of the log's CPU besides the write itself (issue #35's profile).
public struct LineLogHandler: LogHandler {
    /// A metadata key and its value.
    public typealias Field = (key: String, value: Logger.MetadataValue)

    public var logLevel: Logger.Level
    /// The handler's metadata, sorted by key, each key once.
    private var sorted: [Field] = []
    let label: String
    let format: RelaySettings.LogFormat
    let output: FileHandle

    public init(label: String, level: Logger.Level = .info, format: RelaySettings.LogFormat, output: FileHandle = .standardOutput) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.output = output
    }

    public var metadata: Logger.Metadata {
        get { Dictionary(sorted, uniquingKeysWith: { $1 }) }
        set { sorted = Self.sortedFields(newValue) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { sorted.first { $0.key == key }?.value }
        set { Self.set(key, newValue, in: &sorted) }
    }

    /// The fields of a line for `event`: this handler's metadata, then the event's.
    func fields(for event: LogEvent) -> [Field] { Self.fields(event, sorted: sorted) }

    public func log(event: LogEvent) {
        let fields = fields(for: event)
        let line =
            switch format {
            case .json: Self.jsonLine(event, fields: fields, label: label)
            case .text: Self.textLine(event, fields: fields, label: label, timestamp: Self.localTimestamp())
            }
        Self.writeWhole(line, to: output.fileDescriptor)
    }

    /// The whole line in one `write(2)` as a rule (as `FileHandle.write` would, without first copying it into `Data`),
    /// continuing after a partial write or an interruption. A line that cannot be written is dropped: a full disk or a
    /// closed pipe must not stop the relay.
    static func writeWhole(_ line: [UInt8], to descriptor: Int32) {
        line.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// The handler's metadata, then the event's, then its error, as `StreamLogHandler` merges them: sorted by key,
    /// a later value replacing an earlier one.
    static func fields(_ event: LogEvent, metadata base: Logger.Metadata) -> [Field] { fields(event, sorted: sortedFields(base)) }

    static func fields(_ event: LogEvent, sorted base: [Field]) -> [Field] {
        var extra = event.metadata.map(sortedFields) ?? []
        if let error = event.error {
            set("error.message", "\(error)", in: &extra)
            set("error.type", "\(String(reflecting: type(of: error)))", in: &extra)
        }
        guard !extra.isEmpty else { return base }
        guard !base.isEmpty else { return extra }
        var merged: [Field] = []
        merged.reserveCapacity(base.count + extra.count)
        var (i, j) = (0, 0)
        while i < base.count, j < extra.count {
            if base[i].key < extra[j].key {
                merged.append(base[i])
                i += 1
            } else {
                if base[i].key == extra[j].key { i += 1 }  // the event's value wins
                merged.append(extra[j])
                j += 1
            }
        }
        merged += base[i...]
        merged += extra[j...]
        return merged
    }

    static func sortedFields(_ metadata: Logger.Metadata) -> [Field] {
        metadata.sorted { $0.key < $1.key }
    }

    /// Sets, replaces or (nil) removes `key` in fields sorted by key, keeping them sorted.
    static func set(_ key: String, _ value: Logger.MetadataValue?, in fields: inout [Field]) {
        let index = fields.firstIndex { $0.key >= key } ?? fields.endIndex
        let present = index < fields.endIndex && fields[index].key == key
        switch (value, present) {
        case (let value?, true): fields[index].value = value
        case (let value?, false): fields.insert((key: key, value: value), at: index)
        case (nil, true): fields.remove(at: index)
        case (nil, false): break
        }
    }

    static func jsonLine(_ event: LogEvent, fields: [Field], label: String) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(512)
        line.append(contentsOf: #"{"ts":""#.utf8)
        Self.appendTimestamp(to: &line)
        line.append(contentsOf: #"","level":"#.utf8)
        JSONBytes.appendString(event.level.rawValue, to: &line)
        line.append(contentsOf: #","msg":"#.utf8)
        LogText.append(event.message.description, json: true, to: &line)
        line.append(contentsOf: #","logger":"#.utf8)
        LogText.append(label, json: true, to: &line, limit: LogText.maximumKeyBytes)
        for (key, value) in fields where !Self.reserved.contains(key) {
            line.append(UInt8(ascii: ","))
            LogText.append(key, json: true, to: &line, limit: LogText.maximumKeyBytes)
            line.append(UInt8(ascii: ":"))
            LogText.append(value.description, json: true, to: &line)
        }
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    static func textLine(_ event: LogEvent, fields: [Field], label: String, timestamp: String) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(512)
        line.append(contentsOf: timestamp.utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: event.level.rawValue.utf8)
        if !label.isEmpty {
            line.append(UInt8(ascii: " "))
            LogText.append(label, json: false, to: &line, limit: LogText.maximumKeyBytes)
        }
        line.append(UInt8(ascii: ":"))
        for (key, value) in fields {
            line.append(UInt8(ascii: " "))
            LogText.append(key, json: false, to: &line, limit: LogText.maximumKeyBytes)
            line.append(UInt8(ascii: "="))
            LogText.append(value.description, json: false, to: &line)
        }
        line.append(contentsOf: " [".utf8)
        LogText.append(event.source, json: false, to: &line, limit: LogText.maximumKeyBytes)
        line.append(contentsOf: "] ".utf8)
        LogText.append(event.message.description, json: false, to: &line)
        line.append(UInt8(ascii: "\n"))
        return line
    }

    /// Now, in local time, as `StreamLogHandler` writes it: `%Y-%m-%dT%H:%M:%S%z`. The text changes once a second, so
    /// the last one is kept with its second: formatting it for every line (`localtime_r`, `strftime`, a new string)
    /// was a measurable part of a line's cost (issue #35).
    static func localTimestamp() -> String {
        var now = time(nil)
        if let text = lastTimestamp.withLockedValue({ $0.second == now ? $0.text : nil }) { return text }
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return "<unknown>" }
        let text = withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            let count = strftime(buffer.baseAddress!, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: count), as: UTF8.self)
        }
        lastTimestamp.withLockedValue { $0 = (now, text) }
        return text
    }

    private static let lastTimestamp = NIOLockedValueBox<(second: time_t, text: String)>((-1, ""))

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
