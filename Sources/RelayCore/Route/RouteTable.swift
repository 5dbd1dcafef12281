/// One FCM send the relay owes for an event: which route, which project, which message.
public struct Ping: Sendable, Equatable {
    public var route: String
    public var project: String
    public var message: FCMMessage

    public init(route: String, project: String, message: FCMMessage) {
        self.route = route
        self.project = project
        self.message = message
    }
}

/// Every configured route, in order; turns an event into its pings.
public struct RouteTable: Sendable {
    public let routes: [Route]

    /// Validates every definition; route names must be unique. Errors name the route by index; the first is thrown.
    public init(_ definitions: [RouteDefinition]) throws(RouteTableError) {
        let (table, errors) = Self.checking(definitions)
        if let first = errors.first { throw first }
        self = table
    }

    private init(routes: [Route]) { self.routes = routes }

    /// Validates every definition and keeps going past a bad one: the table of the valid routes, and each bad route's
    /// problem (a route named twice is a problem of the second), in order.
    public static func checking(_ definitions: [RouteDefinition]) -> (table: RouteTable, errors: [RouteTableError]) {
        var routes: [Route] = []
        var errors: [RouteTableError] = []
        for (index, definition) in definitions.enumerated() {
            do throws(RouteError) {
                let route = try Route(definition, index: index)
                if routes.contains(where: { $0.name == route.name }) {
                    throw RouteError(key: "name", problem: "'\(route.name)' is used twice", fix: "give each route its own name")
                }
                routes.append(route)
            } catch {
                errors.append(RouteTableError(index: index, error: error))
            }
        }
        return (RouteTable(routes: routes), errors)
    }

    /// The pings for one version, in route order; routes whose filters do not match are skipped.
    public func pings(for version: TemplateVersion, project: String) -> [Ping] {
        routes.filter { $0.matches(version) }.map {
            Ping(route: $0.name, project: project, message: $0.message(for: version, project: project))
        }
    }
}

/// A route that failed validation, with its position in the `routes` list.
public struct RouteTableError: Error, Equatable, Sendable, CustomStringConvertible {
    public var index: Int
    public var error: RouteError
    public var key: String { "routes[\(index)].\(error.key)" }
    public var description: String { "\(key): \(error.problem); \(error.fix)" }
}
