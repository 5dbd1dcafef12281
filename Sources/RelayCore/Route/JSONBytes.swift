/// A minimal JSON writer for the per-request answers (objects, arrays, strings, integers, booleans), with RFC 8259
/// string escaping: on the per-webhook path a `JSONEncoder` costs several times more. Keys are written in the order
/// given; callers write them sorted, as the relay's `JSONEncoder` answers are.
public struct JSONBytes {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init() { bytes.reserveCapacity(320) }

    /// `{`, or `"name":{` inside an object.
    public mutating func open(_ name: String? = nil) {
        if let name { key(name) } else { comma() }
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    public mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// `"name":[`, or `[` with no name; each element then starts with ``open(_:)``.
    public mutating func openArray(_ name: String? = nil) {
        if let name { key(name) } else { comma() }
        bytes.append(UInt8(ascii: "["))
        needsComma = false
    }

    public mutating func closeArray() {
        bytes.append(UInt8(ascii: "]"))
        needsComma = true
    }

    public mutating func key(_ name: String) {
        comma()
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func field(_ name: String, _ value: String) {
        key(name)
        string(value)
        needsComma = true
    }

    /// A field left out when `value` is nil.
    public mutating func field(_ name: String, _ value: String?) {
        if let value { field(name, value) }
    }

    public mutating func field(_ name: String, _ value: Int?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    public mutating func field(_ name: String, _ value: Int64?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    /// A number as Swift prints it: the shortest text that reads back as the same `Double` (what `JSONEncoder` writes).
    public mutating func field(_ name: String, number value: Double?) {
        guard let value else { return }
        key(name)
        bytes.append(contentsOf: String(value).utf8)
        needsComma = true
    }

    /// An array of strings, left out when nil.
    public mutating func field(_ name: String, _ values: [String]?) {
        guard let values else { return }
        openArray(name)
        for value in values {
            comma()
            string(value)
            needsComma = true
        }
        closeArray()
    }

    public mutating func field(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        needsComma = true
    }

    /// An object of strings, keys sorted so equal maps give equal bytes.
    public mutating func object(_ name: String, _ fields: [String: String]) {
        open(name)
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) { field(key, value) }
        close()
    }

    /// Pre-encoded JSON, written as it is.
    public mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
        needsComma = true
    }

    public mutating func string(_ value: String) {
        Self.appendString(value, to: &bytes)
    }

    private mutating func comma() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    /// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped, the rest as UTF-8. The
    /// runs between escapes are copied whole (a byte-by-byte append measured 2.4 µs a webhook, `scripts/profile`).
    public static func appendString(_ text: String, to line: inout [UInt8]) {
        line.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var run = 0
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                line.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
                run = index + 1
                switch byte {
                case UInt8(ascii: "\""): line.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): line.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\n"): line.append(contentsOf: #"\n"#.utf8)
                case UInt8(ascii: "\r"): line.append(contentsOf: #"\r"#.utf8)
                case UInt8(ascii: "\t"): line.append(contentsOf: #"\t"#.utf8)
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    line.append(contentsOf: #"\u00"#.utf8)
                    line.append(hex[Int(byte >> 4)])
                    line.append(hex[Int(byte & 0xF)])
                }
            }
            line.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        line.append(UInt8(ascii: "\""))
    }
}
