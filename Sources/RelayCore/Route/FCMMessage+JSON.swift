extension FCMMessage {
    /// The message as FCM's JSON, written directly: on the per-webhook path a `JSONEncoder` costs several times more.
    /// Same object as the `Encodable` conformance gives, with `data` and header keys sorted so equal messages give
    /// equal bytes.
    public var json: [UInt8] {
        var out = JSONBytes()
        out.open()
        switch target {
        case .topic(let topic): out.field("topic", topic)
        case .condition(let condition): out.field("condition", condition)
        case .token(let token): out.field("token", token)
        }
        out.object("data", data)
        out.key("android")
        out.open()
        out.field("priority", android.priority)
        out.field("collapse_key", android.collapse_key)
        out.field("ttl", android.ttl)
        out.close()
        out.key("apns")
        out.open()
        out.object("headers", apns.headers)
        out.key("payload")
        out.raw(#"{"aps":{"content-available":\#(apns.payload.aps.contentAvailable)}}"#)
        out.close()
        out.key("webpush")
        out.open()
        out.object("headers", webpush.headers)
        out.close()
        out.close()
        return out.bytes
    }
}

/// A minimal JSON writer for flat objects of strings: enough for an FCM message, with RFC 8259 string escaping.
public struct JSONBytes {
    private(set) var bytes: [UInt8] = []
    private var needsComma = false

    init() { bytes.reserveCapacity(320) }

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    mutating func key(_ name: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        string(name)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    mutating func field(_ name: String, _ value: String) {
        key(name)
        string(value)
        needsComma = true
    }

    mutating func object(_ name: String, _ fields: [String: String]) {
        key(name)
        open()
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) { field(key, value) }
        close()
    }

    mutating func raw(_ text: String) {
        bytes.append(contentsOf: text.utf8)
        needsComma = true
    }

    mutating func string(_ value: String) {
        Self.appendString(value, to: &bytes)
    }

    /// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped, the rest as UTF-8.
    public static func appendString(_ text: String, to line: inout [UInt8]) {
        line.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): line.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): line.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): line.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): line.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): line.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                line.append(contentsOf: #"\u00"#.utf8)
                line.append(hex[Int(byte >> 4)])
                line.append(hex[Int(byte & 0xF)])
            default: line.append(byte)
            }
        }
        line.append(UInt8(ascii: "\""))
    }
}
