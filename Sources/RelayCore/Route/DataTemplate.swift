import Foundation

/// A `data` value with `{{field}}` placeholders filled from the template version at send time.
public struct DataTemplate: Sendable, Equatable {
    /// The version fields a value can use. Each is cut to a fixed budget so a route's size is known at load time.
    public enum Field: String, Sendable, CaseIterable {
        case version, updateType, updateOrigin, updateTime, project, authorEmail, description, rollbackSource, changedParameters

        /// The most UTF-8 bytes the field can add to a message.
        public var budget: Int {
            switch self {
            case .version, .rollbackSource: 20
            case .updateType, .updateOrigin, .project: 64
            case .updateTime: 40
            case .authorEmail: 254
            case .description: 256
            case .changedParameters: 512
            }
        }

        func value(_ version: TemplateVersion, project: String, changedParameters: [String]?) -> String {
            switch self {
            case .version: String(version.versionNumber)
            case .updateType: version.updateType ?? ""
            case .updateOrigin: version.updateOrigin ?? ""
            case .updateTime: version.updateTime ?? ""
            case .project: project
            case .authorEmail: version.updateUser?.email ?? ""
            case .description: version.description ?? ""
            case .rollbackSource: version.rollbackSource.map(String.init) ?? ""
            case .changedParameters: Self.list(changedParameters, budget: budget)
            }
        }

        /// `{{changedParameters}}`: the names, comma-separated, when they are known and fit the budget whole; `*`
        /// (anything may have changed) otherwise. Never a cut list: an app must not skip a fetch it needs.
        static func list(_ names: [String]?, budget: Int) -> String {
            guard let names, !names.contains(where: { $0.contains(",") || $0 == "*" }) else { return "*" }
            let joined = names.joined(separator: ",")
            return joined.utf8.count <= budget ? joined : "*"
        }
    }

    enum Part: Sendable, Equatable {
        case literal(String)
        case field(Field)
    }

    let parts: [Part]

    /// Parses `text`; an unknown `{{name}}` is an error that lists the known fields.
    public init(_ text: String) throws(RouteError) {
        var parts: [Part] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{") {
            if open.lowerBound > rest.startIndex { parts.append(.literal(String(rest[..<open.lowerBound]))) }
            guard let close = rest[open.upperBound...].range(of: "}}") else {
                throw RouteError(key: "", problem: "'{{' is not closed", fix: "write a placeholder as {{version}}")
            }
            let name = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
            guard let field = Field(rawValue: name) else {
                throw RouteError(
                    key: "", problem: "unknown placeholder {{\(name)}}",
                    fix: "use one of " + Field.allCases.map { "{{\($0.rawValue)}}" }.joined(separator: ", "))
            }
            parts.append(.field(field))
            rest = rest[close.upperBound...]
        }
        if !rest.isEmpty { parts.append(.literal(String(rest))) }
        self.parts = parts
    }

    /// The largest number of UTF-8 bytes this value can render to.
    public var maximumByteCount: Int {
        parts.reduce(0) { total, part in
            switch part {
            case .literal(let text): total + text.utf8.count
            case .field(let field): total + field.budget
            }
        }
    }

    /// Whether the value uses `field`.
    public func uses(_ field: Field) -> Bool { parts.contains(.field(field)) }

    /// Fills the placeholders; each field is cut to its budget on a character boundary. `changedParameters`: the
    /// parameters the version changed, nil when unknown.
    public func render(_ version: TemplateVersion, project: String, changedParameters: [String]? = nil) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text): out += text
            case .field(let field):
                out += Self.truncated(field.value(version, project: project, changedParameters: changedParameters), to: field.budget)
            }
        }
        return out
    }

    static func truncated(_ text: String, to budget: Int) -> String {
        guard text.utf8.count > budget else { return text }
        var out = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            if used + size > budget { break }
            out.append(character)
            used += size
        }
        return out
    }
}
