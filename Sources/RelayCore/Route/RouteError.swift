/// A route that FCM would refuse, or that cannot work; found when the configuration loads.
public struct RouteError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The key within the route, such as `topic` or `data.from`.
    public var key: String
    /// What is wrong.
    public var problem: String
    /// How to mend it.
    public var fix: String

    public init(key: String, problem: String, fix: String) {
        self.key = key
        self.problem = problem
        self.fix = fix
    }

    public var description: String { "\(key): \(problem); \(fix)" }
}
