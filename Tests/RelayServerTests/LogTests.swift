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

/// The text format is what swift-log's `StreamLogHandler` writes, but for the second the line was written at.
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
                level: .notice, message: "webhook refused", metadata: ["status": "401", "reason": "a b=c\nd", "a": "overridden"],
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
