import Foundation

/// A field Google's JSON parser refuses: where (`message.android.ttl`), and Google's words for why.
struct FieldViolation: Error, Equatable, Sendable, CustomStringConvertible {
    var field: String
    var description: String
}

extension DiscoveryDocument {
    /// Checks `value` against schema `id` the way Google's front ends parse a request (protobuf's JSON mapping): every
    /// member known under its JSON or proto name, each value of its field's type; `null` is a field's default.
    func check(_ value: JSONValue, against id: String) throws(FieldViolation) {
        try check(value, .reference(id), path: "")
    }

    private func check(_ value: JSONValue, _ kind: Kind, path: String) throws(FieldViolation) {
        if case .null = value { return }
        switch kind {
        case .reference(let id):
            try check(value, schemas[id] ?? .any, path: path)
        case .message(let id, let fields):
            guard let members = value.members else { throw invalid(path, "type.googleapis.com/\(package).\(id)", value) }
            for (name, member) in members {
                guard let field = fields[name] else {
                    let at = path.isEmpty ? "" : " at '\(path)'"
                    throw FieldViolation(
                        field: path.isEmpty ? name : "\(path).\(name)",
                        description: "Invalid JSON payload received. Unknown name \"\(name)\"\(at): Cannot find field.")
                }
                try check(member, field, path: path.isEmpty ? name : "\(path).\(name)")
            }
        case .map(let values):
            guard let members = value.members else { throw invalid(path, "TYPE_MESSAGE", value) }
            for (index, member) in members.enumerated() { try check(member.value, values, path: "\(path)[\(index)].value") }
        case .array(let items):
            guard case .array(let elements) = value else { throw invalid(path, "TYPE_MESSAGE", value) }
            for (index, element) in elements.enumerated() { try check(element, items, path: "\(path)[\(index)]") }
        case .any:
            return
        case .boolean:
            guard case .bool = value else { throw invalid(path, "TYPE_BOOL", value) }
        case .enumeration(let names):
            switch value {
            // FCM takes its enums in either case (firebase-admin writes `normal`).
            case .string(let text) where names.contains(where: { $0.caseInsensitiveCompare(text) == .orderedSame }): return
            // By number, also written as a string: any int32, as proto3's open enums take numbers not yet named.
            case .number(let text) where Int32(text) != nil: return
            case .string(let text) where Int32(text) != nil && text.utf8.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: "-") }): return
            default: throw invalid(path, "TYPE_ENUM", value)
            }
        case .integer(let format):
            let (type, range): (String, ClosedRange<Int64>) =
                format == "uint32" ? ("TYPE_UINT32", 0...Int64(UInt32.max)) : ("TYPE_INT32", Int64(Int32.min)...Int64(Int32.max))
            guard let number = Self.integer(value), range.contains(number) else { throw invalid(path, type, value) }
        case .number(let format):
            let type = format == "float" ? "TYPE_FLOAT" : "TYPE_DOUBLE"
            switch value {
            case .number: return
            case .string(let text) where Double(text) != nil || ["NaN", "Infinity", "-Infinity"].contains(text): return
            default: throw invalid(path, type, value)
            }
        case .string(let format):
            try checkString(value, format: format, path: path)
        }
    }

    private func checkString(_ value: JSONValue, format: String?, path: String) throws(FieldViolation) {
        switch format {
        case "int64":
            guard Self.integer(value) != nil else { throw invalid(path, "TYPE_INT64", value) }
        case "uint64":
            guard let number = Self.integer(value), number >= 0 else { throw invalid(path, "TYPE_UINT64", value) }
        case "google-duration":
            guard let text = value.string, Self.isDuration(text) else {
                throw invalid(path, "type.googleapis.com/google.protobuf.Duration", value)
            }
        case "google-datetime":
            guard let text = value.string, Self.isTimestamp(text) else {
                throw invalid(path, "type.googleapis.com/google.protobuf.Timestamp", value)
            }
        case "byte":
            guard let text = value.string, Self.isBase64(text) else { throw invalid(path, "TYPE_BYTES", value) }
        default:
            guard case .string = value else { throw invalid(path, "TYPE_STRING", value) }
        }
    }

    /// Google's words for a value of the wrong type: `Invalid value at 'message.data[0].value' (TYPE_STRING), 12`.
    private func invalid(_ path: String, _ type: String, _ value: JSONValue) -> FieldViolation {
        let shown: String
        switch value {
        case .object: shown = "Starting an object on a scalar field"
        case .array: shown = "Starting an array on a scalar field"
        default: shown = value.text
        }
        return FieldViolation(field: path, description: "Invalid value at '\(path)' (\(type)), \(shown)")
    }

    /// An integer sent as a JSON number or a decimal string; `1.0` and `1e2` are integers too, as protobuf reads them.
    static func integer(_ value: JSONValue) -> Int64? {
        switch value {
        case .number(let text), .string(let text):
            if let exact = Int64(text) { return exact }
            guard let double = Double(text), double.rounded() == double, abs(double) < 9.007_199_254_740_992e15 else { return nil }
            return Int64(double)
        default: return nil
        }
    }

    /// `3.5s`, `-2s`: seconds with at most nine fraction digits, within ±10,000 years.
    static func isDuration(_ text: String) -> Bool {
        guard text.range(of: #"^-?[0-9]{1,12}(\.[0-9]{1,9})?s$"#, options: .regularExpression) != nil,
            let seconds = Double(text.dropLast())
        else { return false }
        return abs(seconds) <= 315_576_000_000
    }

    /// RFC 3339 with an offset or `Z`.
    static func isTimestamp(_ text: String) -> Bool {
        text.range(
            of:
                #"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"#,
            options: .regularExpression) != nil
    }

    /// Base64, standard or URL-safe, padded or not.
    static func isBase64(_ text: String) -> Bool {
        text.range(of: #"^[A-Za-z0-9+/_-]*={0,2}$"#, options: .regularExpression) != nil
    }
}
