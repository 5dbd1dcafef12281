/// How a message, key or value goes on a log line (``LineLogHandler``), so that a line is one record whatever a
/// sender put in a header, a path or a body that ends up in it:
///
/// - **Escaped.** A backslash is `\\`; line feed, carriage return and tab are `\n`, `\r`, `\t`; every other control
///   character (U+0000–U+001F, U+007F–U+009F) and the Unicode line and paragraph separators (U+2028, U+2029) are
///   `\u` and four hex digits. In `json`, a quote is `\"` as well. Nothing else changes: other text is written as its
///   UTF-8.
/// - **Bounded.** A message or value is cut after ``maximumValueBytes`` bytes of its escaped text (at a character's
///   boundary), followed by `…[N bytes cut]`, N counting the original's UTF-8 bytes left out; keys, the logger's label
///   and the source module after ``maximumKeyBytes``. docs/operations.md (Logs) states both.
enum LogText {
    static let maximumValueBytes = 1024
    static let maximumKeyBytes = 128

    /// Appends `text`, escaped for the format (`json`: inside quotes, which this writes too) and bounded.
    static func append(_ text: String, json: Bool, to line: inout [UInt8], limit: Int = maximumValueBytes) {
        if json { line.append(UInt8(ascii: "\"")) }
        var text = text
        text.withUTF8 { utf8 in
            let start = line.count
            var run = 0  // the start of the bytes not yet copied
            var index = 0
            var cutAt: Int?  // the first byte of the input left out
            func copyRun(upTo end: Int) -> Bool {
                guard run < end else { return true }
                let room = limit - (line.count - start)
                if end - run <= room {
                    line.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<end]))
                    return true
                }
                // Cut inside the run, never inside a character: back up over continuation bytes.
                var stop = run + max(room, 0)
                while stop > run, utf8[stop] & 0xC0 == 0x80 { stop -= 1 }
                line.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<stop]))
                cutAt = stop
                return false
            }
            while index < utf8.count {
                let byte = utf8[index]
                let width: Int  // the escaped character's length in the input; 0: not escaped
                switch byte {
                case 0..<0x20, 0x7F, UInt8(ascii: "\\"): width = 1
                case UInt8(ascii: "\"") where json: width = 1
                case 0xC2 where index + 1 < utf8.count && (0x80...0x9F).contains(utf8[index + 1]): width = 2
                case 0xE2 where index + 2 < utf8.count && utf8[index + 1] == 0x80 && (0xA8...0xA9).contains(utf8[index + 2]): width = 3
                default: width = 0
                }
                guard width > 0 else {
                    index += 1
                    continue
                }
                guard copyRun(upTo: index) else { break }
                // The code point: the byte itself, U+0080–U+009F (C2 80–9F), or U+2028/U+2029 (E2 80 A8/A9).
                let scalar = width == 1 ? UInt32(byte) : width == 2 ? UInt32(utf8[index + 1]) : 0x2000 | UInt32(utf8[index + 2] & 0x3F)
                let escape = Self.escape(scalar)
                guard escape.count <= limit - (line.count - start) else {
                    cutAt = index
                    break
                }
                line.append(contentsOf: escape)
                index += width
                run = index
            }
            if cutAt == nil { _ = copyRun(upTo: utf8.count) }
            if let cutAt {
                line.append(contentsOf: "…[\(utf8.count - cutAt) bytes cut]".utf8)
            }
        }
        if json { line.append(UInt8(ascii: "\"")) }
    }

    /// The escape of one character, by its code point.
    private static func escape(_ scalar: UInt32) -> [UInt8] {
        switch scalar {
        case 0x5C: return Array(#"\\"#.utf8)
        case 0x22: return Array(#"\""#.utf8)
        case 0x0A: return Array(#"\n"#.utf8)
        case 0x0D: return Array(#"\r"#.utf8)
        case 0x09: return Array(#"\t"#.utf8)
        default:
            let hex = Array("0123456789abcdef".utf8)
            return Array(#"\u"#.utf8) + [12, 8, 4, 0].map { hex[Int(scalar >> UInt32($0) & 0xF)] }
        }
    }
}
