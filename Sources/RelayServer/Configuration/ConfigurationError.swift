/// A configuration that cannot work: the key, what is wrong with it, and how to mend it. Never holds a secret.
///
/// Loading goes on past a mistake, so one error carries every problem the file has, as a compiler reports them: the
/// first in `key`, `problem` and `fix`, the rest in ``more``.
public struct ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public var key: String
    public var problem: String
    public var fix: String
    /// The other problems found in the same load, in the order found.
    public var more: [ConfigurationError] = []

    public init(key: String, problem: String, fix: String) {
        self.key = key
        self.problem = problem
        self.fix = fix
    }

    /// Every problem, the first one first.
    public var all: [ConfigurationError] {
        var first = self
        first.more = []
        return [first] + more.flatMap(\.all)
    }

    public var description: String {
        let all = all
        guard all.count > 1 else { return Self.line(self) }
        return "\(all.count) configuration errors:\n" + all.map { "  " + Self.line($0) }.joined(separator: "\n")
    }

    private static func line(_ error: ConfigurationError) -> String {
        "configuration error at '\(error.key)': \(error.problem). Fix: \(error.fix)"
    }
}

/// The problems found so far in one load. Each check runs on its own and, when it fails, gives a stand-in value so
/// the checks after it still run.
final class ConfigurationProblems {
    private(set) var found: [ConfigurationError] = []

    /// `body`'s value, or `fallback` once its problem is noted.
    func check<T>(_ fallback: @autoclosure () -> T, _ body: () throws(ConfigurationError) -> T) -> T {
        do {
            return try body()
        } catch {
            found += error.all
            return fallback()
        }
    }

    func note(_ error: ConfigurationError) { found += error.all }

    /// Adds to each problem whose value came from a variable or a flag where it came from (`(set by RC_RELAY_PORT)`),
    /// whichever check found it: a setting's key, or the list or section above it (`webhook.secrets[0]`).
    func name(_ sources: [String: ConfigurationSources.Source]) {
        found = found.map { error in
            var key = Substring(error.key)
            while true {
                if let label = sources[String(key)]?.label {
                    var named = error
                    named.problem += " (set by \(label))"
                    return named
                }
                guard let cut = key.lastIndex(where: { $0 == "." || $0 == "[" }) else { return error }
                key = key[..<cut]
            }
        }
    }

    /// Throws every problem found as one error.
    func throwIfAny() throws(ConfigurationError) {
        guard var first = found.first else { return }
        first.more = Array(found.dropFirst())
        throw first
    }
}
