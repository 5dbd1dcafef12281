import Foundation
import Logging
import RelayCore
import Testing

@testable import RelayServer

/// The JSON log handler writes lines any JSON parser reads back exactly, whatever the message and fields hold.
@Test func jsonLogLinesParseBackToWhatWasLogged() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-log-\(UUID().uuidString).jsonl").path
    #expect(FileManager.default.createFile(atPath: path, contents: nil))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let file = try #require(FileHandle(forWritingAtPath: path))
    var logger = Logger(label: "test.logger") { LineLogHandler(label: $0, level: .info, format: .json, output: file) }
    logger[metadataKey: "request_id"] = "r-1"
    let tricky = "quote \" backslash \\ newline \n tab \t bell \u{07} unicode é ✓ 🚀"
    logger.info("\(tricky)", metadata: ["field": "\(tricky)", "ts": "must not replace the timestamp"])
    logger.debug("below the level: not written")
    try file.close()
    let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
    #expect(lines.count == 1)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: String])
    #expect(object["msg"] == tricky)
    #expect(object["field"] == tricky)
    #expect(object["request_id"] == "r-1")
    #expect(object["level"] == "info")
    #expect(object["logger"] == "test.logger")
    let ts = try #require(object["ts"])
    #expect(ts.count == 24 && ts.hasSuffix("Z"))
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    let parsed = try #require(formatter.date(from: ts))
    #expect(abs(parsed.timeIntervalSinceNow) < 60)
}

/// The answers' hand-written dates are what Foundation's formatter writes, around the epoch and leap days too.
@Test func answerDatesMatchFoundationsFormat() throws {
    let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    for seconds in [0, 1_795_000_000.123, 1_709_164_800.999, 951_782_400.5, -1.25, 4_102_444_799.001] {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(DateFormat.string(date) == date.formatted(style), "\(seconds)")
        #expect(abs(try DateFormat().decode(DateFormat.string(date)).timeIntervalSince(date)) < 0.001)
    }
}

/// The text format is what swift-log's `StreamLogHandler` writes, but for the second the line was written at, and for
/// escapes (below: no line break or control character reaches the line).
@Test func textLogLinesAreWhatStreamLogHandlerWrites() throws {
    final class Captured: TextOutputStream, @unchecked Sendable {
        var text = ""
        func write(_ string: String) { text += string }
    }
    struct Failure: Error, CustomStringConvertible { var description: String { "it failed" } }
    let events: [(Logger.Metadata, LogEvent)] = [
        ([:], LogEvent(level: .info, message: "request", metadata: nil, source: "RelayServer", file: "", function: "", line: 0)),
        (
            ["request_id": "abc", "client": "127.0.0.1", "a": "first"],
            LogEvent(
                level: .notice, message: "webhook refused", metadata: ["status": "401", "reason": "a b=c d", "a": "overridden"],
                source: "RelayServer", file: "", function: "", line: 0)
        ),
        (
            ["list": ["x", "y"], "map": ["k": "v"]],
            LogEvent(level: .error, message: "ünïcödé", metadata: [:], source: "rc_relay", file: "", function: "", line: 0)
        ),
        (
            ["request_id": "abc"],
            LogEvent(
                level: .warning, message: "with an error", error: Failure(), metadata: nil, source: "DeliveryEngine", file: "", function: "",
                line: 0)
        ),
    ]
    for label in ["rc-relay", ""] {
        for (metadata, event) in events {
            let captured = Captured()
            var reference = StreamLogHandler(label: label, stream: captured, metadataProvider: nil)
            reference.metadata = metadata
            reference.log(event: event)
            let fields = LineLogHandler.fields(event, metadata: metadata)
            let ours = String(decoding: LineLogHandler.textLine(event, fields: fields, label: label, timestamp: "T"), as: UTF8.self)
            let theirs = captured.text
            // Everything after the timestamp is the same; the timestamp has the same shape.
            #expect(ours.dropFirst(1) == theirs.drop { $0 != " " }, "\(event.message)")
            #expect(theirs.prefix { $0 != " " }.count == LineLogHandler.localTimestamp().count)
        }
    }
    #expect(LineLogHandler.localTimestamp().wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}/) != nil)
}

/// Keys set, replaced and removed one at a time (as a request sets them) leave the same fields, in the same order, as
/// `StreamLogHandler` keeps: the handler's sorted array is bookkeeping of its own, so it is checked against theirs.
/// A fixed seed and a new one each run; a failure names its seed.
@Test(arguments: [20_261_127, UInt64.random(in: 0...UInt64.max)])
func metadataSetKeyByKeyIsKeptAsStreamLogHandlerKeepsIt(seed: UInt64) {
    final class Captured: TextOutputStream, @unchecked Sendable {
        var text = ""
        func write(_ string: String) { text += string }
    }
    var generator = SplitMix64(seed: seed)
    let keys = ["request_id", "client", "event_id", "project", "version", "format", "route", "a", "zz", "Z", "é"]
    for _ in 0..<200 {
        let captured = Captured()
        var reference = StreamLogHandler(label: "rc-relay", stream: captured, metadataProvider: nil)
        var ours = LineLogHandler(label: "rc-relay", format: .text)
        for _ in 0..<Int.random(in: 0...12, using: &generator) {
            let key = keys.randomElement(using: &generator)!
            let value: Logger.MetadataValue? = Bool.random(using: &generator) ? nil : "\(Int.random(in: 0...9, using: &generator))"
            reference[metadataKey: key] = value
            ours[metadataKey: key] = value
            #expect(ours[metadataKey: key]?.description == value?.description, "seed \(seed)")
        }
        #expect(ours.metadata.mapValues(\.description) == reference.metadata.mapValues(\.description), "seed \(seed)")
        let event = LogEvent(
            level: .info, message: "line", metadata: ["version": "event's", "b": "1"], source: "RelayServer", file: "", function: "", line: 0)
        reference.log(event: event)
        let fields = ours.fields(for: event)
        let line = String(decoding: LineLogHandler.textLine(event, fields: fields, label: "rc-relay", timestamp: "T"), as: UTF8.self)
        #expect(line.dropFirst(1) == captured.text.drop { $0 != " " }, "seed \(seed)")
    }
}

/// Issue #48: a record is one line whatever it holds. Every control character, the Unicode line breaks and a backslash
/// are escaped in the message, the keys and the values, in both formats; the JSON line still reads back exactly.
@Test(arguments: [RelaySettings.LogFormat.text, .json])
func aRecordIsOneLineWhateverItHolds(format: RelaySettings.LogFormat) throws {
    let controls = (0..<0x20).map { String(UnicodeScalar(UInt8($0))) }.joined() + "\u{7F}" + (0x80...0x9F).map { String(UnicodeScalar($0)!) }.joined()
    let hostile = "start\(controls)\u{2028}\u{2029}\\n\"end\r\n2026-11-29T00:00:00+0000 critical rc-relay: forged"
    let event = LogEvent(
        level: .notice, message: "\(hostile)", metadata: ["reason": "\(hostile)", "k\ney": "v"], source: "RelayServer", file: "", function: "",
        line: 0)
    let fields = LineLogHandler.fields(event, metadata: ["path": "\(hostile)"])
    let line =
        format == .json
        ? LineLogHandler.jsonLine(event, fields: fields, label: "rc-relay")
        : LineLogHandler.textLine(event, fields: fields, label: "rc-relay", timestamp: "T")
    #expect(line.last == UInt8(ascii: "\n"))
    #expect(!line.dropLast().contains { $0 < 0x20 || $0 == 0x7F }, "no control byte but the line's own end")
    let text = String(decoding: line, as: UTF8.self)
    #expect(!text.unicodeScalars.dropLast().contains { (0x80...0x9F).contains($0.value) || $0.value == 0x2028 || $0.value == 0x2029 })
    if format == .json {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(object["msg"] == hostile && object["reason"] == hostile && object["path"] == hostile && object["k\ney"] == "v")
    } else {
        #expect(text.contains(#"reason=start\u0000\u0001"#))
        #expect(text.contains(#"\t\n\u000b\u000c\r"#))
        #expect(text.contains(#"\u007f\u0080"#) && text.contains(#"\u009f\u2028\u2029\\n"end\r\n2026"#))
        #expect(text.contains(#" k\ney=v "#))
    }
}

/// Issue #48: a message or value is cut past 1,024 bytes of its escaped text (a key past 128), at a character's
/// boundary, with a marker saying how much was cut: one request cannot make a line of kilobytes.
@Test(arguments: [RelaySettings.LogFormat.text, .json])
func everyValueIsBoundedAndSaysWhatWasCut(format: RelaySettings.LogFormat) throws {
    let huge = String(repeating: "é", count: 32 * 1024)  // 64 KB of two-byte characters
    let controls = String(repeating: "\u{1}", count: 64 * 1024)  // 64 KB that escape to six times as much
    let event = LogEvent(
        level: .info, message: "\(huge)", metadata: ["huge": "\(huge)", "controls": "\(controls)", String(repeating: "k", count: 300): "v"],
        source: "RelayServer", file: "", function: "", line: 0)
    let fields = LineLogHandler.fields(event, metadata: [:])
    let line =
        format == .json
        ? LineLogHandler.jsonLine(event, fields: fields, label: "rc-relay")
        : LineLogHandler.textLine(event, fields: fields, label: "rc-relay", timestamp: "T")
    // Three values of at most 1,024 bytes and their markers, a key of 128, and the line's own fields.
    #expect(line.count < 4 * 1024, "\(line.count) bytes")
    let text = String(decoding: line, as: UTF8.self)
    #expect(!text.contains("\u{FFFD}"), "cut at a character's boundary")
    #expect(text.contains("…[\(64 * 1024 - 1024) bytes cut]"), "the message and the huge value: 512 characters of two bytes kept")
    #expect(text.contains("…[\(64 * 1024 - 170) bytes cut]"), "the controls: 170 escapes of six bytes kept")
    if format == .json {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: String])
        #expect(object["huge"] == String(repeating: "é", count: 512) + "…[\(64 * 1024 - 1024) bytes cut]")
    }
}
