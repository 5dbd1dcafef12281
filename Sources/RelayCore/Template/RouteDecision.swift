/// Which changes a route is for (`when.changed`), and how it may narrow its audience (`audience`): a map from Remote
/// Config condition names to the FCM topics whose devices those conditions describe.
public struct ChangeRule: Sendable, Equatable {
    /// Parameter names or glob patterns (`*`, `?`); parameters in groups count like any other.
    public var parameters: [String]
    /// Condition names: the route is for a change to one of them, or to a parameter's value under one of them.
    public var conditions: [String]

    public init(parameters: [String] = [], conditions: [String] = []) { (self.parameters, self.conditions) = (parameters, conditions) }

    /// Whether the change touches what this rule names. A condition added, removed, changed or re-ordered can change
    /// what any parameter resolves to, the listed ones included, so it always matches: never fewer pings than needed.
    public func matches(_ diff: TemplateDiff) -> Bool {
        let conditionNames = Set(conditions)
        if !diff.conditions.isEmpty || diff.conditionsReordered { return true }
        return diff.parameters.contains { change in
            parameters.contains { Glob.matches($0, change.name) } || !change.conditions.isDisjoint(with: conditionNames)
        }
    }
}

/// What a route does with one version: whether it fires, to whom, and why, as the delivery history and the preview
/// show it.
public struct RouteDecision: Sendable, Equatable {
    public var fires: Bool
    /// Where its pings go: the route's own target, or the narrowed audience (several targets when FCM's five-topic
    /// limit splits it).
    public var targets: [FCMMessage.Target]
    /// Why, in words: `no change rule`, `parameters changed: a, b`, `template unavailable: …`, `audience narrowed to
    /// conditions ios_ja`, and so on.
    public var reason: String

    public init(fires: Bool, targets: [FCMMessage.Target], reason: String) { (self.fires, self.targets, self.reason) = (fires, targets, reason) }
}

extension Route {
    /// Whether the route needs to know what changed: it has a change rule or an audience map, its data names the
    /// changed parameters, or it has another target (an HTTP target's call describes the change).
    public var isChangeAware: Bool { changeRule != nil || !audience.isEmpty || rendersChanges || destination != nil }

    /// The decision for a version whose change is `diff`; nil `diff` means it could not be known (`unavailable` says
    /// why), and then the route fires to its whole audience: never fewer pings than needed.
    public func decide(_ diff: TemplateDiff?, unavailable: String? = nil) -> RouteDecision {
        guard changeRule != nil || !audience.isEmpty else { return RouteDecision(fires: true, targets: [target], reason: "no change rule") }
        guard let diff else {
            return RouteDecision(fires: true, targets: [target], reason: "whole audience: the change is unknown (\(unavailable ?? "no template"))")
        }
        if let changeRule, !changeRule.matches(diff) {
            return RouteDecision(fires: false, targets: [], reason: "no change this route is for")
        }
        let why = changeRule == nil ? "changed" : "a change this route is for"
        guard !audience.isEmpty, let confined = diff.confinedToConditions, !confined.isEmpty,
            confined.isSubset(of: Set(audience.keys))
        else {
            let broad = audience.isEmpty ? "" : ": " + Self.broadReason(diff, audience: audience)
            return RouteDecision(fires: true, targets: [target], reason: "\(why), whole audience\(broad)")
        }
        let topics = Array(Set(confined.compactMap { audience[$0] })).sorted()
        let targets = stride(from: 0, to: topics.count, by: TopicRules.maxConditionTopics).map { start -> FCMMessage.Target in
            let group = topics[start..<min(start + TopicRules.maxConditionTopics, topics.count)]
            return group.count == 1 ? .topic(group.first!) : .condition(group.map { "'\($0)' in topics" }.joined(separator: " || "))
        }
        return RouteDecision(
            fires: true, targets: targets, reason: "\(why), audience narrowed to conditions \(confined.sorted().joined(separator: ", "))")
    }

    private static func broadReason(_ diff: TemplateDiff, audience: [String: String]) -> String {
        if diff.conditionsReordered { return "conditions were re-ordered" }
        if !diff.conditions.isEmpty { return "conditions changed: " + diff.conditions.map(\.name).prefix(5).joined(separator: ", ") }
        if let unconfined = diff.parameters.first(where: { $0.kind != .changed || $0.defaultChanged || $0.valueTypeChanged }) {
            return "parameter \(unconfined.name) was \(unconfined.kind == .changed ? "changed for everyone" : unconfined.kind.rawValue)"
        }
        let unmapped = Set(diff.parameters.flatMap(\.conditions)).subtracting(audience.keys).sorted()
        return unmapped.isEmpty ? "nothing changed" : "condition \(unmapped.prefix(5).joined(separator: ", ")) has no audience topic"
    }
}

/// Glob patterns as shells write them: `*` any run of characters, `?` one character; everything else literal.
enum Glob {
    static func matches(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.unicodeScalars)
        let t = Array(text.unicodeScalars)
        var (pi, ti) = (0, 0)
        var star: Int?
        var resume = 0
        while ti < t.count {
            if pi < p.count, p[pi] == "*" {
                star = pi
                resume = ti
                pi += 1
            } else if pi < p.count, p[pi] == "?" || p[pi] == t[ti] {
                pi += 1
                ti += 1
            } else if let star {
                pi = star + 1
                resume += 1
                ti = resume
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}
