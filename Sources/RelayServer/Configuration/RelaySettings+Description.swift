/// How settings print, wherever they are interpolated or reflected (a service's description in swift-service-lifecycle's
/// debug line, an error): where it listens and what it serves, never an admin token, a secret or a password.
extension RelaySettings: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        "RelaySettings(\(host):\(port), projects: \(projects.map { $0.id ?? "(from the metadata server)" }), \(routeCount) route(s))"
    }

    public var debugDescription: String { description }

    /// No children: a reflection of the settings shows the description above, not the fields that hold secrets.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    private var routeCount: Int { projects.reduce(0) { $0 + $1.routes.routes.count } }
}
