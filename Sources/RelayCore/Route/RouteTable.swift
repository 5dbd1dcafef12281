/// One send the relay owes for an event: which route, which project, what it carries (``PingPayload``).
public struct Ping: Sendable, Equatable {
    /// The route's name; a route whose narrowed audience needs several pings (FCM's five-topic limit) names each
    /// part `name#1`, `name#2`, … (route names cannot hold `#`).
    public var route: String
    public var project: String
    public var payload: PingPayload
    /// The FCM message it carries; for another target's message, an empty message to the route's name (never sent).
    public var message: FCMMessage {
        get {
            switch payload {
            case .fcm(let message): message
            case .target(let other):
                FCMMessage(
                    target: .topic(other.route), data: [:], android: .init(priority: "normal", collapse_key: "", ttl: "0s"),
                    apns: .init(headers: [:], payload: .init(aps: .init())), webpush: .init(headers: [:]))
            }
        }
        set { payload = .fcm(newValue) }
    }
    /// Why the route fired to this audience, for a change-aware route (``RouteDecision/reason``).
    public var decision: String?
    /// When it may go: after its route's quiet period, at its shard's turn (a waved route's ping per shard is named
    /// `name@0`, `name@1`, …; route names cannot hold `@`).
    public var schedule: PingSchedule
    /// A change-aware route's ping to part of its audience: the topics it reaches (a topic, or those its condition
    /// joins with `||`). Nil for a route's whole audience. The route's whole audience reaches these devices too, so a
    /// newer version's ping there makes an older one here stale (``LatestVersions``).
    public var narrowedTopics: Set<String>? = nil

    public init(route: String, project: String, message: FCMMessage, decision: String? = nil, schedule: PingSchedule = .immediate) {
        self.init(route: route, project: project, payload: .fcm(message), decision: decision, schedule: schedule)
    }

    public init(route: String, project: String, payload: PingPayload, decision: String? = nil, schedule: PingSchedule = .immediate) {
        self.route = route
        self.project = project
        self.payload = payload
        self.decision = decision
        self.schedule = schedule
    }

    /// The route or shard a ping or a part of one belongs to (`name#2` → `name`; `name@3` stays: each shard is due
    /// on its own).
    public static func baseRoute(_ name: String) -> String { String(name.prefix { $0 != "#" }) }

    /// The configured route's name (`name#2`, `name@3` → `name`).
    public static func routeName(_ name: String) -> String { String(name.prefix { $0 != "#" && $0 != "@" }) }
}

/// What is known of a version's change when it is routed.
public enum TemplateChange: Sendable, Equatable {
    /// No route asks (none is change-aware), so nothing was fetched.
    case notNeeded
    case known(TemplateDiff)
    /// It could not be known; why (change-aware routes then ping their whole audience).
    case unknown(String)

    /// The parameters whose value may now differ for some device, for `{{changedParameters}}`: nil (anything may have
    /// changed) when the change is unknown or touched conditions, which can change any parameter.
    public var changedParameters: [String]? {
        guard case .known(let diff) = self, diff.conditions.isEmpty, !diff.conditionsReordered else { return nil }
        return diff.changedParameterNames
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
        pings(for: version, project: project, change: .notNeeded)
    }

    /// Whether any route needs to know what a version changed.
    public var isChangeAware: Bool { routes.contains(where: \.isChangeAware) }

    /// The pings for one version knowing what it changed: a change-aware route fires only for the changes it is for,
    /// to its narrowed audience where the change allows, and to its whole audience when the change is unknown.
    public func pings(for version: TemplateVersion, project: String, change: TemplateChange) -> [Ping] {
        let matching = routes.filter { $0.matches(version) }
        let pings = matching.filter { $0.destination == nil }.flatMap {
            fcmPings(route: $0, version: version, project: project, change: change)
        }
        // Other targets describe the version, with the FCM audiences its pings go to, and come after them.
        let audiences = pings.compactMap { $0.payload.audience.isDevice ? nil : $0.payload.audience.key }
        let calls = matching.compactMap { route -> Ping? in
            let decision = route.decide(change)
            guard decision.fires, let message = route.targetMessage(for: version, project: project, change: change, audiences: audiences) else {
                return nil
            }
            return Ping(
                route: route.name, project: project, payload: .target(message), decision: route.changeRule == nil ? nil : decision.reason,
                schedule: PingSchedule(quiet: route.quiet))
        }
        let byRoute = Dictionary(grouping: pings + calls) { Ping.routeName($0.route) }
        return matching.flatMap { byRoute[$0.name] ?? [] }
    }

    private func fcmPings(route: Route, version: TemplateVersion, project: String, change: TemplateChange) -> [Ping] {
        guard route.isChangeAware else {
            return route.pings(of: route.message(for: version, project: project), project: project)
        }
        let decision = route.decide(change)
        guard decision.fires else { return [] }
        let template = route.message(for: version, project: project, changedParameters: change.changedParameters)
        // The whole audience goes in waves when the route has them; a narrowed audience is a part of it already.
        if decision.targets == [route.target] { return route.pings(of: template, project: project, decision: decision.reason) }
        return decision.targets.enumerated().map { index, target in
            var message = template
            message.target = target
            let name = decision.targets.count == 1 ? route.name : "\(route.name)#\(index + 1)"
            var ping = Ping(
                route: name, project: project, message: message, decision: decision.reason, schedule: PingSchedule(quiet: route.quiet))
            switch target {
            case .topic(let topic): ping.narrowedTopics = [topic]
            case .condition(let condition): ping.narrowedTopics = (try? TopicRules.conditionTopics(condition)).map(Set.init)
            case .token: break
            }
            return ping
        }
    }
}

extension Route {
    /// The decision for a version whose change is `change` (``decide(_:unavailable:)``).
    public func decide(_ change: TemplateChange) -> RouteDecision {
        switch change {
        case .known(let diff): decide(diff)
        case .unknown(let why): decide(nil, unavailable: why)
        case .notNeeded: decide(nil, unavailable: "not fetched")
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
