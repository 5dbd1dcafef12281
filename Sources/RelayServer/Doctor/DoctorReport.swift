import Foundation

/// One line of `rc-relay doctor`'s report: what was checked, how it went, and what to do about it.
public struct DoctorCheck: Sendable, Equatable, Encodable {
    public enum Result: String, Sendable, Encodable {
        /// It works.
        case ok
        /// It works, but will need attention (a migration still to apply, no store tables yet).
        case warn
        /// It does not work: the relay would fail here.
        case fail
        /// Not checked, because something it needs failed or it is not configured.
        case skip
    }

    /// The Firebase project checked; nil for what the relay as a whole uses (the configuration, the store, OIDC).
    public var project: String?
    public var check: String
    public var result: Result
    public var detail: String
    /// What to do; nil when nothing is to be done.
    public var fix: String?

    public init(project: String? = nil, check: String, result: Result, detail: String, fix: String? = nil) {
        (self.project, self.check, self.result, self.detail, self.fix) = (project, check, result, detail, fix)
    }
}

/// Everything `rc-relay doctor` found, as a table for a person or JSON for a script.
public struct DoctorReport: Sendable, Encodable {
    /// The configuration file read.
    public var configuration: String
    public var checks: [DoctorCheck]

    /// True when no check failed (warnings and skips allowed).
    public var ok: Bool { !checks.contains { $0.result == .fail } }

    public init(configuration: String, checks: [DoctorCheck]) { (self.configuration, self.checks) = (configuration, checks) }

    private enum CodingKeys: String, CodingKey { case configuration, ok, checks }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(configuration, forKey: .configuration)
        try container.encode(ok, forKey: .ok)
        try container.encode(checks, forKey: .checks)
    }

    /// `{"configuration", "ok", "checks": [{"project", "check", "result", "detail", "fix"}]}`.
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// The table a person reads: CHECK, RESULT, WHAT TO DO, each project's checks under its name, long cells
    /// wrapped within `width` columns.
    public func table(width: Int = 120, color: Bool = false) -> String {
        func name(_ check: DoctorCheck) -> String { check.project == nil ? check.check : "  " + check.check }
        let header = ["CHECK", "RESULT", "WHAT TO DO"]
        let first = min(max(header[0].count, checks.map { name($0).count }.max() ?? 0), 32, max(width / 3, header[0].count))
        let rest = max(width - first - 4, 20)
        let anyFix = checks.contains { $0.fix != nil }
        // What to do is never cut inside a word (a role's name, an email) where the width allows.
        let longestWord = min(checks.compactMap { $0.fix?.split(separator: " ").map(\.count).max() }.max() ?? 0, 40, rest * 2 / 3)
        let wanted = min(max(header[1].count, checks.map { $0.detail.count + 6 }.max() ?? 0), anyFix ? rest * 11 / 20 : rest - 12)
        let third = max(rest - wanted, 10, longestWord)
        let second = rest - third
        let widths = [first, second, third]
        var out = "rc-relay doctor: \(configuration)\n\n"
        out += line(header, widths: widths).joined(separator: "\n") + "\n"
        var project: String?
        for check in checks {
            if check.project != project {
                project = check.project
                out += project.map { "project \($0)\n" } ?? ""
            }
            let cells = [name(check), "\(check.result.rawValue): \(check.detail)", check.fix ?? ""]
            var lines = line(cells, widths: widths)
            if color, let code = Self.colors[check.result] {
                // Only the result word is coloured: the columns stay aligned.
                let word = check.result.rawValue
                if let range = lines[0].range(of: " \(word):") {
                    lines[0].replaceSubrange(range, with: " \u{1B}[\(code)m\(word)\u{1B}[0m:")
                }
            }
            out += lines.joined(separator: "\n") + "\n"
        }
        let counts = DoctorCheck.Result.allCases.compactMap { result -> String? in
            let count = checks.filter { $0.result == result }.count
            return count == 0 ? nil : "\(count) \(result.rawValue)"
        }
        out += "\n\(checks.count) \(checks.count == 1 ? "check" : "checks"): \(counts.joined(separator: ", ")). "
        out += ok ? "Nothing failed.\n" : "Fix what failed, then run rc-relay doctor again.\n"
        return out
    }

    private static let colors: [DoctorCheck.Result: String] = [.ok: "32", .warn: "33", .fail: "31;1", .skip: "2"]

    /// One row, its cells wrapped at word boundaries, as many lines as its longest cell needs.
    private func line(_ cells: [String], widths: [Int]) -> [String] {
        let wrapped = zip(cells, widths).map { Self.wrap($0, width: $1) }
        let height = wrapped.map(\.count).max() ?? 1
        return (0..<height).map { index in
            zip(wrapped, widths).enumerated().map { column, pair in
                let text = index < pair.0.count ? pair.0[index] : ""
                return column == cells.count - 1 ? text : text.padding(toLength: pair.1, withPad: " ", startingAt: 0)
            }.joined(separator: "  ").replacingOccurrences(of: #"\s+$"#, with: "", options: .regularExpression)
        }
    }

    /// Words to lines of at most `width` characters (a longer word is cut).
    package static func wrap(_ text: String, width: Int) -> [String] {
        let indent = String(text.prefix { $0 == " " })
        guard indent.isEmpty else { return wrap(String(text.dropFirst(indent.count)), width: width - indent.count).map { indent + $0 } }
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            var word = String(word)
            while word.count > width {
                if !current.isEmpty {
                    lines.append(current)
                    current = ""
                }
                lines.append(String(word.prefix(width)))
                word = String(word.dropFirst(width))
            }
            if current.isEmpty {
                current = word
            } else if current.count + 1 + word.count <= width {
                current += " " + word
            } else {
                lines.append(current)
                current = word
            }
        }
        if !current.isEmpty || lines.isEmpty { lines.append(current) }
        return lines
    }
}

extension DoctorCheck.Result: CaseIterable {}
