/// The parts of protobuf's JSON mapping that Google's event data uses beyond plain JSON: a field under either of its
/// two names, enums by name or number, timestamps with any offset.
enum ProtoJSON {
    /// A JSON member name as sent.
    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { self.stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// An object's known fields, each found under its JSON name or its proto name (never both: Google's parsers refuse
    /// that too); other members are ignored.
    struct Fields<Field: Hashable & RawRepresentable<String>> {
        let container: KeyedDecodingContainer<Key>
        private let found: [Field: Key]

        init(_ decoder: any Decoder, names: [String: Field]) throws {
            container = try decoder.container(keyedBy: Key.self)
            var found: [Field: Key] = [:]
            for key in container.allKeys {
                guard let field = names[key.stringValue] else { continue }
                if let other = found[field] {
                    let names = [other.stringValue, key.stringValue].sorted()
                    throw DecodeError.fieldGivenTwice("'\(field.rawValue)' is given twice, as '\(names[0])' and '\(names[1])'")
                }
                found[field] = key
            }
            self.found = found
        }

        func key(_ field: Field) -> Key? { found[field] }

        func string(_ field: Field) throws -> String? {
            guard let key = found[field] else { return nil }
            return try container.decodeIfPresent(String.self, forKey: key)
        }

        /// An enum sent by name (kept as sent, a name Google added later too) or by number (`names[n]`, or the number
        /// itself when it is past the names known).
        func enumeration(_ field: Field, names: [String]) throws -> String? {
            guard let key = found[field], try !container.decodeNil(forKey: key) else { return nil }
            if let name = try? container.decode(String.self, forKey: key) { return enumName(name, names: names) }
            guard let number = try? container.decode(Int32.self, forKey: key) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container, debugDescription: "'\(key.stringValue)' must be an enum name or number")
            }
            return names.indices.contains(Int(number)) ? names[Int(number)] : String(number)
        }
    }

    /// An enum sent as a string: its name, kept as sent, or a number written as a string ("3"), read as the number as
    /// protobuf's parsers read it (`names[n]`, or the text itself when it is past the names known).
    static func enumName(_ name: String, names: [String]) -> String {
        guard let number = Int32(name), name.utf8.allSatisfy({ (48...57).contains($0) }) else { return name }
        return names.indices.contains(Int(number)) ? names[Int(number)] : name
    }

    /// An int64 sent as a decimal string, as openapi.yaml says: an optional minus, then 1 to 19 digits (no plus, no
    /// spaces), within int64 as a JSON number is; nil for any other text.
    static func int64(decimal text: String) -> Int64? {
        let digits = text.utf8.first == UInt8(ascii: "-") ? text.utf8.dropFirst() : text.utf8[...]
        guard (1...19).contains(digits.count), digits.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Int64(text)
    }

    /// An RFC 3339 timestamp (`2026-11-26T10:00:00.5+02:00`) in UTC (`2026-11-26T08:00:00.5Z`), its fraction kept;
    /// nil when it is not one.
    static func utcTimestamp(_ text: String) -> String? {
        let b = Array(text.utf8)
        func digits(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var value = 0
            for byte in b[from..<(from + count)] {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard b.count >= 20, let year = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), b[10] | 0x20 == UInt8(ascii: "t"), let hour = digits(11, 2), b[13] == UInt8(ascii: ":"),
            let minute = digits(14, 2), b[16] == UInt8(ascii: ":"), let second = digits(17, 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var index = 19
        var fraction = ""
        if index < b.count, b[index] == UInt8(ascii: ".") {
            let start = index + 1
            index = start
            while index < b.count, (48...57).contains(b[index]) { index += 1 }
            guard index > start, index - start <= 9 else { return nil }
            fraction = "." + String(decoding: b[start..<index], as: UTF8.self)
        }
        let offsetMinutes: Int
        if index + 1 == b.count, b[index] | 0x20 == UInt8(ascii: "z") {
            // Already UTC as written (what Eventarc and Remote Config send): nothing to compute.
            if b[index] == UInt8(ascii: "Z"), b[10] == UInt8(ascii: "T") { return text }
            offsetMinutes = 0
        } else if index + 6 == b.count, b[index] == UInt8(ascii: "+") || b[index] == UInt8(ascii: "-"),
            let hours = digits(index + 1, 2), b[index + 3] == UInt8(ascii: ":"), let minutes = digits(index + 4, 2), hours < 24, minutes < 60
        {
            offsetMinutes = (hours * 60 + minutes) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        let local = (days(year: year, month: month, day: day) * 1440 + hour * 60 + minute) - offsetMinutes
        let (dayNumber, minuteOfDay) = (local.floorDiv(1440), local.floorMod(1440))
        let (y, m, d) = civil(days: dayNumber)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(y).count)) + String(y)
        return "\(yearText)-\(two(m))-\(two(d))T\(two(minuteOfDay / 60)):\(two(minuteOfDay % 60)):\(two(second))\(fraction)Z"
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDiv(400)
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day number (`civil_from_days`).
    static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = z.floorDiv(146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Int {
    fileprivate func floorDiv(_ d: Int) -> Int { self >= 0 ? self / d : (self - d + 1) / d }
    fileprivate func floorMod(_ d: Int) -> Int { self - floorDiv(d) * d }
}
