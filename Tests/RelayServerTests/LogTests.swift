import Foundation
import Logging
import Testing

@testable import RelayServer

/// The JSON log handler writes lines any JSON parser reads back exactly, whatever the message and fields hold.
@Test func jsonLogLinesParseBackToWhatWasLogged() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-log-\(UUID().uuidString).jsonl").path
    #expect(FileManager.default.createFile(atPath: path, contents: nil))
    defer { try? FileManager.default.removeItem(atPath: path) }
    let file = try #require(FileHandle(forWritingAtPath: path))
    var logger = Logger(label: "test.logger") { JSONLogHandler(label: $0, level: .info, output: file) }
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
