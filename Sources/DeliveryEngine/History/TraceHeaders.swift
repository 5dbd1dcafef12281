import W3CTraceContext

/// W3C Trace Context's two headers, read as the recommendation says (https://www.w3.org/TR/trace-context/), into the
/// form the tracer reads without complaint, or into nothing. Nothing here logs: a malformed value is dropped without
/// a word, since any caller could send one per request (issue #48).
///
/// - `traceparent`: `version-traceid-parentid-flags` in lower-case hex. Version `ff` is refused. Version `00` is exactly
///   55 characters. A higher version is read by its first 55 characters (what follows must start with `-`), and only
///   its sampled flag is kept: the result is written as version `00`. Neither id may be all zeros.
/// - `tracestate`: at most 32 list members within 512 bytes, each `key=value` by the recommendation's grammar, no key
///   twice; written back without the optional spaces. Anything else drops the `tracestate` alone (the `traceparent`
///   still counts), as the recommendation allows.
package enum TraceHeaders {
    package static let maximumStateBytes = 512
    package static let maximumStateMembers = 32

    /// Both headers, as the tracer should read them; nil when `traceparent` is missing or malformed.
    package static func read(traceparent: String?, tracestate: String?) -> (traceparent: String, tracestate: String?)? {
        guard let traceparent = traceparent.flatMap(Self.traceparent) else { return nil }
        var state = tracestate.flatMap(Self.tracestate)
        // The tracer's own parser has the last word, silently: what it would refuse (and log) is dropped here.
        if (try? TraceContext(traceParentHeaderValue: traceparent, traceStateHeaderValue: state)) == nil {
            guard (try? TraceContext(traceParentHeaderValue: traceparent)) != nil else { return nil }
            state = nil
        }
        return (traceparent, state)
    }

    /// `traceparent` in version 00's form, or nil.
    package static func traceparent(_ value: String) -> String? {
        let bytes = Array(value.utf8.prefix(56))
        guard bytes.count >= 55, isHex(bytes[0..<2]), !(bytes[0] == UInt8(ascii: "f") && bytes[1] == UInt8(ascii: "f")) else { return nil }
        let version00 = bytes[0] == UInt8(ascii: "0") && bytes[1] == UInt8(ascii: "0")
        // Version 00 is 55 characters exactly; a later one may go on, after a dash.
        if version00 ? value.utf8.count != 55 : bytes.count > 55 && bytes[55] != UInt8(ascii: "-") { return nil }
        let dash = UInt8(ascii: "-")
        guard bytes[2] == dash, bytes[35] == dash, bytes[52] == dash else { return nil }
        let (trace, parent, flags) = (bytes[3..<35], bytes[36..<52], bytes[53..<55])
        guard isHex(trace), isHex(parent), isHex(flags), trace.contains(where: { $0 != UInt8(ascii: "0") }),
            parent.contains(where: { $0 != UInt8(ascii: "0") })
        else { return nil }
        // A later version's flags: only the sampled bit is understood.
        let low = flags.last!
        let sampled = (isDigit(low) ? low - 0x30 : low - 0x61 + 10) & 1 == 1
        let flagText = version00 ? String(decoding: flags, as: UTF8.self) : sampled ? "01" : "00"
        return "00-" + String(decoding: trace, as: UTF8.self) + "-" + String(decoding: parent, as: UTF8.self) + "-" + flagText
    }

    /// `tracestate` without its optional spaces and empty members, or nil when it breaks a rule.
    package static func tracestate(_ value: String) -> String? {
        guard value.utf8.count <= maximumStateBytes else { return nil }
        var members: [Substring] = []
        var keys: Set<Substring> = []
        for member in value.split(separator: ",", omittingEmptySubsequences: false) {
            // OWS around each member: spaces and tabs.
            let isSpace = { (c: Character) in c == " " || c == "\t" }
            guard let first = member.firstIndex(where: { !isSpace($0) }), let last = member.lastIndex(where: { !isSpace($0) }) else { continue }
            let text = member[first...last]
            guard let equals = text.firstIndex(of: "="), isKey(text[..<equals]), isValue(text[text.index(after: equals)...]),
                keys.insert(text[..<equals]).inserted
            else { return nil }
            members.append(text)
        }
        guard members.count <= maximumStateMembers else { return nil }
        return members.isEmpty ? nil : members.joined(separator: ",")
    }

    /// `simple-key` (a lower-case letter, then up to 255 of `a-z 0-9 _ - * /`) or `tenant@system` (a letter or digit
    /// and up to 240 more; a letter and up to 13 more).
    static func isKey(_ key: Substring) -> Bool {
        func isKeyCharacter(_ byte: UInt8) -> Bool {
            isLowerAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "*")
                || byte == UInt8(ascii: "/")
        }
        let parts = key.utf8.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            guard let first = parts[0].first, isLowerAlpha(first), parts[0].count <= 256 else { return false }
            return parts[0].allSatisfy(isKeyCharacter)
        case 2:
            let (tenant, system) = (parts[0], parts[1])
            guard let t = tenant.first, isLowerAlpha(t) || isDigit(t), tenant.count <= 241, let s = system.first, isLowerAlpha(s),
                system.count <= 14
            else { return false }
            return tenant.allSatisfy(isKeyCharacter) && system.allSatisfy(isKeyCharacter)
        default:
            return false
        }
    }

    /// Up to 256 printable ASCII characters but `,` and `=`, not ending in a space.
    static func isValue(_ value: Substring) -> Bool {
        guard !value.isEmpty, value.utf8.count <= 256, value.utf8.last != UInt8(ascii: " ") else { return false }
        return value.utf8.allSatisfy { (0x20...0x7E).contains($0) && $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: "=") }
    }

    private static func isHex<C: Collection<UInt8>>(_ bytes: C) -> Bool { bytes.allSatisfy { isDigit($0) || (0x61...0x66).contains($0) } }
    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
    private static func isLowerAlpha(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) }
}
