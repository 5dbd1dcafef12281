/// A template version read in place when its JSON is plain: an object of known fields only, each once, whose strings
/// have no escape and whose numbers are non-negative integers. That is what Eventarc, Remote Config and scripts send;
/// `JSONDecoder` with protobuf's two names per field cost 7 µs of a webhook's CPU for it (issue #35's profile).
/// Anything else (an unknown or repeated field, `null`, an escape, an enum as a JSON number, a negative or
/// fractional JSON number, white space that is not JSON's) is left to `JSONDecoder`, which reads it or says what is wrong: this
/// reader only ever answers with what `JSONDecoder` would (a test holds it to that).
enum PlainTemplateVersion {
    static func read(_ bytes: UnsafeRawBufferPointer) -> TemplateVersion? {
        var cursor = Cursor(bytes: bytes)
        var version = TemplateVersion(versionNumber: 0)
        var seen: UInt8 = 0  // a bit per field
        guard
            cursor.object({ key, cursor in
                guard let field = Field(key: key), seen & field.bit == 0 else { return false }
                seen |= field.bit
                switch field {
                case .versionNumber:
                    guard let number = cursor.int64() else { return false }
                    version.versionNumber = number
                case .updateTime:
                    guard let text = cursor.string() else { return false }
                    version.updateTime = ProtoJSON.utcTimestamp(text) ?? text
                case .updateUser:
                    guard let user = user(&cursor) else { return false }
                    version.updateUser = user
                case .description:
                    guard let text = cursor.string() else { return false }
                    version.description = text
                case .updateOrigin:
                    guard let name = cursor.string() else { return false }
                    version.updateOrigin = ProtoJSON.enumName(name, names: TemplateVersion.updateOrigins)
                case .updateType:
                    guard let name = cursor.string() else { return false }
                    version.updateType = ProtoJSON.enumName(name, names: TemplateVersion.updateTypes)
                case .rollbackSource:
                    guard let number = cursor.int64() else { return false }
                    version.rollbackSource = number == 0 ? nil : number  // proto3's default: no rollback
                }
                return true
            }), cursor.atEnd, seen & Field.versionNumber.bit != 0
        else { return nil }
        return version
    }

    private enum Field: UInt8 {
        case versionNumber, updateTime, updateUser, description, updateOrigin, updateType, rollbackSource

        var bit: UInt8 { 1 << rawValue }

        init?(key: String) {
            switch key {
            case "versionNumber", "version_number": self = .versionNumber
            case "updateTime", "update_time": self = .updateTime
            case "updateUser", "update_user": self = .updateUser
            case "description": self = .description
            case "updateOrigin", "update_origin": self = .updateOrigin
            case "updateType", "update_type": self = .updateType
            case "rollbackSource", "rollback_source": self = .rollbackSource
            default: return nil
            }
        }
    }

    private static func user(_ cursor: inout Cursor) -> TemplateVersion.User? {
        var user = TemplateVersion.User()
        var seen = Set<String>()
        let read = cursor.object { key, cursor in
            let field = key == "image_url" ? "imageUrl" : key
            guard ["name", "email", "imageUrl"].contains(field), seen.insert(field).inserted, let text = cursor.string() else { return false }
            switch field {
            case "name": user.name = text
            case "email": user.email = text
            default: user.imageUrl = text
            }
            return true
        }
        return read ? user : nil
    }

    /// Reads plain JSON from bytes; every method answers nil (or false) at the first thing it does not take.
    private struct Cursor {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// `{ "key": value, … }`, each member's value read by `member`; false when anything is not plain.
        mutating func object(_ member: (String, inout Cursor) -> Bool) -> Bool {
            guard take(UInt8(ascii: "{")) else { return false }
            if take(UInt8(ascii: "}")) { return true }
            repeat {
                guard let key = string(), take(UInt8(ascii: ":")), member(key, &self) else { return false }
            } while take(UInt8(ascii: ","))
            return take(UInt8(ascii: "}"))
        }

        /// A string with no escape and no control character, in valid UTF-8.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\"), bytes[index] >= 0x20 {
                index += 1
            }
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            defer { index += 1 }
            return String(validating: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }

        /// An int64 as protobuf's JSON sends it: a decimal string (read as `JSONDecoder`'s path reads it), or a JSON
        /// integer (no sign, no leading zero, no fraction or exponent) within int64.
        mutating func int64() -> Int64? {
            skipSpace()
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "\"") { return string().flatMap(ProtoJSON.int64(decimal:)) }
            let start = index
            while index < bytes.count, (48...57).contains(bytes[index]) { index += 1 }
            let digits = bytes[start..<index]
            guard (1...19).contains(digits.count), digits.count == 1 || digits.first != UInt8(ascii: "0") else { return nil }
            guard index == bytes.count || (bytes[index] != UInt8(ascii: ".") && bytes[index] | 0x20 != UInt8(ascii: "e")) else { return nil }
            return Int64(String(decoding: UnsafeRawBufferPointer(rebasing: digits), as: UTF8.self))
        }
    }
}
