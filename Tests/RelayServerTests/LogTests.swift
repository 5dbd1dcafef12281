import Foundation
import Logging
import RelayServer
import Testing

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
