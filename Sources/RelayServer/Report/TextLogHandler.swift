import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The text log format, as swift-log's `StreamLogHandler` writes it
/// (`2026-11-26T01:36:48+0000 notice rc-relay: key=value … [module] message`), written with less work.
///
/// `StreamLogHandler` sorts and formats the whole metadata again each time one key is set, and rc-relay sets several
/// per request (request id, client, sender, event): with the default logs, that and its formatting were a tenth of a
/// webhook's CPU (docs/performance.md). Here the metadata is formatted once, when a line is written.
public struct TextLogHandler: LogHandler {
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
        output.write(Data(Self.line(event, metadata: metadata, label: label, timestamp: Self.timestamp())))
    }

    /// One line, with the metadata of the handler, the event and its error, keys in order.
    static func line(_ event: LogEvent, metadata base: Logger.Metadata, label: String, timestamp: String) -> [UInt8] {
        var fields = base
        if let extra = event.metadata, !extra.isEmpty { fields.merge(extra) { $1 } }
        if let error = event.error {
            fields["error.message"] = "\(error)"
            fields["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(contentsOf: timestamp.utf8)
        line.append(UInt8(ascii: " "))
        line.append(contentsOf: event.level.rawValue.utf8)
        if !label.isEmpty {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: label.utf8)
        }
        line.append(UInt8(ascii: ":"))
        for key in fields.keys.sorted() {
            line.append(UInt8(ascii: " "))
            line.append(contentsOf: key.utf8)
            line.append(UInt8(ascii: "="))
            line.append(contentsOf: fields[key]!.description.utf8)
        }
        line.append(contentsOf: " [".utf8)
        line.append(contentsOf: event.source.utf8)
        line.append(contentsOf: "] ".utf8)
        line.append(contentsOf: event.message.description.utf8)
        line.append(UInt8(ascii: "\n"))
        return line
    }

    /// Now, in local time, as `StreamLogHandler` writes it: `%Y-%m-%dT%H:%M:%S%z`.
    static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        guard localtime_r(&now, &parts) != nil else { return "<unknown>" }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            let count = strftime(buffer.baseAddress!, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: count), as: UTF8.self)
        }
    }
}
