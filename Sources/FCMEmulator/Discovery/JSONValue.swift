/// A JSON value as sent: members in their order (FCM names a map entry by its position), numbers as written
/// (`12` and `12.0` and `true` stay apart, as protobuf's parser keeps them).
indirect enum JSONValue: Sendable, Equatable {
    case object([(key: String, value: JSONValue)])
    case array([JSONValue])
    case string(String)
    case number(String)
    case bool(Bool)
    case null

    static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.array(let x), .array(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.null, .null): true
        default: false
        }
    }

    /// An object's member; with repeated keys the last one counts, as FCM's parser takes it. Either of two spellings
    /// (`collapseKey`, `collapse_key`). `null` is absent: it is a field's default in protobuf's JSON mapping.
    subscript(_ names: String...) -> JSONValue? {
        guard case .object(let members) = self, let value = members.last(where: { names.contains($0.key) })?.value, value != .null else {
            return nil
        }
        return value
    }

    var string: String? { if case .string(let text) = self { text } else { nil } }
    var members: [(key: String, value: JSONValue)]? { if case .object(let members) = self { members } else { nil } }

    /// The value as JSON text, as Google's error messages quote it.
    var text: String {
        switch self {
        case .object(let members): "{" + members.map { "\(JSONValue.string($0.key).text):\($0.value.text)" }.joined(separator: ",") + "}"
        case .array(let items): "[" + items.map(\.text).joined(separator: ",") + "]"
        case .string(let text): "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        case .number(let text): text
        case .bool(let value): value ? "true" : "false"
        case .null: "null"
        }
    }
}

/// A strict JSON parser (RFC 8259) that keeps member order and number text.
struct JSONParser {
    struct Failure: Error { var offset: Int }

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0
    static let maximumDepth = 64

    static func parse(_ bytes: [UInt8]) throws(Failure) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        let value = try parser.value()
        parser.skipSpace()
        guard parser.index == bytes.count else { throw Failure(offset: parser.index) }
        return value
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private mutating func skipSpace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    private mutating func value() throws(Failure) -> JSONValue {
        skipSpace()
        guard index < bytes.count else { throw Failure(offset: index) }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default: return .number(try number())
        }
    }

    private mutating func literal(_ word: String) throws(Failure) {
        let utf8 = Array(word.utf8)
        guard index + utf8.count <= bytes.count, Array(bytes[index..<(index + utf8.count)]) == utf8 else { throw Failure(offset: index) }
        index += utf8.count
    }

    /// Reads `[`…`]` or `{`…`}`: elements (each read by `element`) separated by commas, up to `closer`, nested at most
    /// ``maximumDepth`` deep.
    private mutating func elements<T>(
        closer: Character, _ element: (inout JSONParser) throws(Failure) -> T
    ) throws(Failure) -> [T] {
        depth += 1
        guard depth <= Self.maximumDepth else { throw Failure(offset: index) }
        defer { depth -= 1 }
        index += 1
        var found: [T] = []
        skipSpace()
        if index < bytes.count, bytes[index] == closer.asciiValue {
            index += 1
            return found
        }
        while true {
            found.append(try element(&self))
            skipSpace()
            guard index < bytes.count else { throw Failure(offset: index) }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == closer.asciiValue else { throw Failure(offset: index) }
            index += 1
            return found
        }
    }

    private mutating func object() throws(Failure) -> JSONValue {
        .object(
            try elements(closer: "}") { (p: inout JSONParser) throws(Failure) -> (key: String, value: JSONValue) in
                p.skipSpace()
                guard p.index < p.bytes.count, p.bytes[p.index] == UInt8(ascii: "\"") else { throw Failure(offset: p.index) }
                let key = try p.string()
                p.skipSpace()
                guard p.index < p.bytes.count, p.bytes[p.index] == UInt8(ascii: ":") else { throw Failure(offset: p.index) }
                p.index += 1
                return (key, try p.value())
            })
    }

    private mutating func array() throws(Failure) -> JSONValue {
        .array(try elements(closer: "]") { (p: inout JSONParser) throws(Failure) -> JSONValue in try p.value() })
    }

    private mutating func string() throws(Failure) -> String {
        index += 1
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw Failure(offset: index) }
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: out, as: UTF8.self) else { throw Failure(offset: index) }
                return text
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { throw Failure(offset: index) }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw Failure(offset: index)
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw Failure(offset: index) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw Failure(offset: index) }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw Failure(offset: index)
                }
            case 0..<0x20: throw Failure(offset: index)
            default: out.append(byte)
            }
        }
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<(index + 4)], as: UTF8.self), radix: 16) else {
            throw Failure(offset: index)
        }
        index += 4
        return value
    }

    private mutating func number() throws(Failure) -> String {
        let start = index
        func isDigit(_ i: Int) -> Bool { i < bytes.count && (48...57).contains(bytes[i]) }
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { throw Failure(offset: index) }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else { while isDigit(index) { index += 1 } }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { throw Failure(offset: index) }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { throw Failure(offset: index) }
            while isDigit(index) { index += 1 }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }
}
