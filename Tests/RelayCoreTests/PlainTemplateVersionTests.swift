import Foundation
import Testing

@testable import RelayCore

/// The in-place reader of plain template versions answers only with what `JSONDecoder` reads, over seeded documents
/// made of every field under both its names, values of each JSON type, escapes, repeats, and near misses.
@Test(arguments: [20_261_127, UInt64.random(in: 1...UInt64.max)])
func plainVersionsReadAsJSONDecoderReadsThem(seed: UInt64) throws {
    var generator = SplitMix64(seed: seed)
    func pick<T>(_ items: [T]) -> T { items[Int(generator.next() % UInt64(items.count))] }
    let keys = [
        "versionNumber", "version_number", "updateTime", "update_time", "updateUser", "update_user", "description", "updateOrigin",
        "update_origin", "updateType", "update_type", "rollbackSource", "rollback_source", "other", "version\\u004eumber", "",
    ]
    let values = [
        #""42""#, "42", "0", #""0""#, "-3", #""-3""#, "05", #""05""#, "1.0", "1e2", "9223372036854775807", "9223372036854775808",
        #""9223372036854775807""#, #""99999999999999999999""#, "null", "true", #""""#, #""CONSOLE""#, #""3""#, "3", #""ROLLBACK""#,
        #""a\"b""#, #""é""#, #""2026-11-26T10:00:00.5+02:00""#, #""2026-11-21T09:14:03.512Z""#, "[]", "{}",
        #"{"name":"Dana","email":"d@example.com"}"#, #"{"image_url":"u","imageUrl":"v"}"#, #"{"imageUrl":"u","other":1}"#,
        #"{"name":null}"#, "{\"name\":\"tab\there\"}",
    ]
    let spaces = ["", " ", "\n", "\t", "\r\n  ", "\u{0B}"]
    var documents = [
        #"{"versionNumber":"42","updateType":"INCREMENTAL_UPDATE"}"#,
        #"{"versionNumber":"42","updateTime":"2026-11-21T09:14:03.512Z","updateUser":{"name":"Dana Ops","email":"dana@example.com"},"description":"Raise the daily reward","updateOrigin":"CONSOLE","updateType":"INCREMENTAL_UPDATE"}"#,
        #"{"version_number":7,"update_type":"ROLLBACK","rollback_source":"6"}"#, "{}", "[]", "", "  {\"versionNumber\":1}  ",
        #"{"versionNumber":"1"} x"#, #"{"versionNumber":"1",}"#, #"{"versionNumber":"1""#, #"{"versionNumber" "1"}"#,
    ]
    // Values each field takes in a plain document, so that many documents are plain and the rest near misses.
    let usual: [String: [String]] = [
        "updateTime": [#""2026-11-26T10:00:00.5+02:00""#, #""2026-11-21T09:14:03.512Z""#, #""not a time""#],
        "updateUser": [#"{"name":"Dana","email":"d@example.com"}"#, #"{"image_url":"u"}"#, "{}"],
        "description": [#""""#, #""Raise the reward""#, #""é""#], "updateOrigin": [#""CONSOLE""#, #""NEW_ORIGIN""#],
        "updateType": [#""INCREMENTAL_UPDATE""#, #""ROLLBACK""#], "rollbackSource": [#""41""#, "0", "7"],
    ]
    for _ in 0..<4_000 {
        let members = (0..<Int(generator.next() % 5)).map { _ in
            var key = pick(keys)
            var value = pick(values)
            if generator.next() % 3 != 0 {
                key = pick(Array(usual.keys))
                value = pick(usual[key]!)
                if generator.next() % 2 == 0 { key = key.replacingOccurrences(of: "([A-Z])", with: "_$1", options: .regularExpression).lowercased() }
            }
            return pick(spaces) + "\"" + key + "\"" + pick(spaces) + ":" + pick(spaces) + value + pick(spaces)
        }
        var document = pick(spaces) + "{" + members.joined(separator: ",") + "}" + pick(spaces)
        if generator.next() % 4 != 0 {
            let number = generator.next() % 2 == 0 ? pick(values) : pick([#""42""#, "42", "0", #""9223372036854775807""#])
            document = "{\"versionNumber\":\(number)" + (members.isEmpty ? "}" : "," + document.drop { $0 != "{" }.dropFirst())
        }
        if generator.next() % 10 == 0, !document.isEmpty {  // a byte dropped
            var bytes = Array(document.utf8)
            bytes.remove(at: Int(generator.next() % UInt64(bytes.count)))
            document = String(decoding: bytes, as: UTF8.self)
        }
        documents.append(document)
    }
    var raw = Array(#"{"versionNumber":"1","description":"ab"}"#.utf8)
    raw[raw.count - 3] = 0xFF  // not UTF-8
    var plainCount = 0
    for bytes in documents.map({ Array($0.utf8) }) + [raw] {
        let expected = try? JSONDecoder().decode(TemplateVersion.self, from: Data(bytes))
        guard let plain = bytes.withUnsafeBytes({ PlainTemplateVersion.read($0) }) else { continue }
        plainCount += 1
        #expect(plain == expected, "seed \(seed): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
    }
    // The reader does read what it is for: a test of it that never reads anything would hold nothing.
    #expect(plainCount > 300, "seed \(seed): only \(plainCount) documents read in place")
}

/// What Eventarc, Remote Config and the bench send is read in place.
@Test func theUsualVersionsAreReadInPlace() throws {
    let eventarc =
        #"{"versionNumber":"42","updateTime":"2026-11-21T09:14:03.512Z","updateUser":{"name":"Dana Ops","email":"dana@example.com","imageUrl":"https://example.com/dana.png"},"description":"Raise the daily reward for level 5 players","updateOrigin":"CONSOLE","updateType":"INCREMENTAL_UPDATE"}"#
    for text in [eventarc, #"{"versionNumber":"1042","updateType":"INCREMENTAL_UPDATE"}"#, "{\n  \"versionNumber\": 5\n}\n"] {
        let plain = Array(text.utf8).withUnsafeBytes { PlainTemplateVersion.read($0) }
        let decoded = try JSONDecoder().decode(TemplateVersion.self, from: Data(text.utf8))
        #expect(plain != nil && plain == decoded, "\(text)")
    }
}
