import Foundation
import NIOCore
import RelayCore
import Testing

@testable import FCMClient

/// FCM's answer to a send is read in place when it is the plain `{"name": "…"}` FCM writes, and by `JSONDecoder`
/// otherwise: whichever reads it, the name is the one `JSONDecoder` reads, and an answer it refuses is refused.
@Test(arguments: [20_261_127, UInt64.random(in: 1...UInt64.max)])
func fcmAnswersReadAsJSONDecoderReadsThem(seed: UInt64) throws {
    struct Sent: Decodable { var name: String }
    var generator = SplitMix64(seed: seed)
    var cases = [
        #"{"name": "projects/demo/messages/0:1500415314455276%31bd1c9631bd1c96"}"#, "{\n  \"name\": \"projects/p/messages/1\"\n}\n",
        #"{"name":"projects\/demo\/messages\/1"}"#, #"{"name":"\b\f\n\r\t\"\\\/"}"#, #"{"name":"\x"}"#, #"{"name":"a\"#,
        #"{"name":""}"#, #"{"name":"a\"b"}"#, #"{"name":"a\\b"}"#, #"{"name":"\u00e9"}"#, #"{"name":"é"}"#, #"{"name":1}"#,
        #"{"name":"a","name":"b"}"#, #"{"name":"a","other":1}"#, #"{"other":1,"name":"a"}"#, #"{"na\u006de":"a"}"#, #"{"name":"a"} x"#,
        #"{"name":"a""#, #"{"name" "a"}"#, "", "{}", "[]", "null", "{\"name\":\"tab\there\"}", #" { "name" : "spaced" } "#,
    ]
    let pieces = [
        "{", "}", "\"name\"", ":", "\"", "a", "\\", "\\\"", "\\/", "\\n", "\\u0041", " ", "\n", ",", "1", "é", "\u{01}", "projects/p/messages/7",
    ]
    for _ in 0..<3_000 {
        let count = Int(generator.next() % 9)
        cases.append((0..<count).map { _ in pieces[Int(generator.next() % UInt64(pieces.count))] }.joined())
        // Near misses of the usual answer: one piece changed.
        var usual = [" {", "\"name\"", ":", " \"", "projects/p/messages/7", "\"", "} "]
        usual[Int(generator.next() % UInt64(usual.count))] = pieces[Int(generator.next() % UInt64(pieces.count))]
        cases.append(usual.joined())
    }
    var raw = [UInt8](#"{"name":"ab"}"#.utf8)
    raw[9] = 0xFF  // not UTF-8
    for bytes in cases.map({ [UInt8]($0.utf8) }) + [raw] {
        let expected = (try? JSONDecoder().decode(Sent.self, from: Data(bytes)))?.name
        let read = FCMSender.messageName(in: ByteBuffer(bytes: bytes))
        #expect(read == expected, "seed \(seed): \(String(decoding: bytes, as: UTF8.self).debugDescription)")
    }
}

/// The usual answers take the fast path (the fallback would hide a fast path that never matches): FCM's, and the
/// emulator's, which escapes its slashes.
@Test(arguments: [
    "{\n  \"name\": \"projects/demo-project/messages/4800481218993\"\n}\n", #"{"name":"projects\/demo-project\/messages\/4800481218993"}"#,
])
func fcmsUsualAnswerIsReadInPlace(answer: String) {
    let name = Array(answer.utf8).withUnsafeBytes { FCMSender.simpleMessageName(in: $0) }
    #expect(name == "projects/demo-project/messages/4800481218993")
}
