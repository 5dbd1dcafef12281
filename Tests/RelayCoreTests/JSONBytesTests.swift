import Foundation
import Testing

@testable import RelayCore

/// `JSONBytes.appendString` copies the runs between escapes whole: every escape at the start, the end, side by side
/// and between multi-byte characters must still read back as the same string.
@Test(arguments: [20_261_127, UInt64.random(in: 1...UInt64.max)])
func everyStringReadsBackAsItself(seed: UInt64) throws {
    var generator = SplitMix64(seed: seed)
    let alphabet: [Character] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{00}", "\u{01}", "\u{1F}", "\u{7F}", "é", "—", "🎉", "日"]
    var cases = ["", "\"", "\\", "\u{00}", "plain ascii only", "\"\"\\\\\n\n", "end\\", "\\start", "🎉\"🎉"]
    for _ in 0..<2_000 {
        let length = Int(generator.next() % 12)
        cases.append(String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }))
    }
    for text in cases {
        var bytes: [UInt8] = []
        JSONBytes.appendString(text, to: &bytes)
        let read = try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String
        #expect(read == text, "seed \(seed): \(text.debugDescription) was written as \(String(decoding: bytes, as: UTF8.self))")
        #expect(!bytes.contains { $0 < 0x20 }, "seed \(seed): a raw control byte in \(text.debugDescription)")
    }
}
