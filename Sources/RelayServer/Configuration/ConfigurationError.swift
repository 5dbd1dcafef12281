/// A configuration that cannot work: the key, what is wrong with it, and how to mend it. Never holds a secret.
public struct ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public var key: String
    public var problem: String
    public var fix: String

    public init(key: String, problem: String, fix: String) {
        self.key = key
        self.problem = problem
        self.fix = fix
    }

    public var description: String { "configuration error at '\(key)': \(problem). Fix: \(fix)" }
}
