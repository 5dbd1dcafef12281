/// What a version changed, as `POST /admin/preview` shows it and an HTTP target's call carries it (docs/targets.md):
/// the same JSON object in both.
public struct ChangeSummary: Sendable, Equatable, Codable {
    public struct Parameter: Sendable, Equatable, Codable {
        public var name: String
        public var kind: String
        public var defaultChanged: Bool
        public var valueTypeChanged: Bool
        /// Conditions whose conditional value was added, removed or is another, sorted.
        public var conditions: [String]
    }

    public struct Condition: Sendable, Equatable, Codable {
        public var name: String
        public var kind: String
    }

    public var known: Bool
    /// The version compared with.
    public var since: String?
    /// Why the change is not known.
    public var reason: String?
    public var parameters: [Parameter] = []
    public var conditions: [Condition] = []
    public var conditionsReordered = false
    /// What `{{changedParameters}}` lists; absent when anything may have changed.
    public var changedParameters: [String]?

    /// The change of version `number`; `since` is the version it was measured from when the caller knows better than
    /// the diff (a preview's `since`); else the diff's own, or N−1.
    public init?(_ change: TemplateChange, of number: Int64, since: Int64? = nil) {
        let base: Int64?
        switch change {
        case .known(let diff): base = since ?? diff.since ?? (number > 1 ? number - 1 : nil)
        default: base = since ?? (number > 1 ? number - 1 : nil)
        }
        switch change {
        case .notNeeded:
            return nil
        case .unknown(let why):
            self.init(known: false, since: base.map(String.init), reason: why)
        case .known(let diff):
            self.init(
                known: true, since: base.map(String.init),
                parameters: diff.parameters.map {
                    Parameter(
                        name: $0.name, kind: $0.kind.rawValue, defaultChanged: $0.defaultChanged, valueTypeChanged: $0.valueTypeChanged,
                        conditions: $0.conditions.sorted())
                },
                conditions: diff.conditions.map { Condition(name: $0.name, kind: $0.kind.rawValue) },
                conditionsReordered: diff.conditionsReordered, changedParameters: change.changedParameters)
        }
    }

    init(
        known: Bool, since: String?, reason: String? = nil, parameters: [Parameter] = [], conditions: [Condition] = [],
        conditionsReordered: Bool = false, changedParameters: [String]? = nil
    ) {
        (self.known, self.since, self.reason, self.parameters) = (known, since, reason, parameters)
        (self.conditions, self.conditionsReordered, self.changedParameters) = (conditions, conditionsReordered, changedParameters)
    }

    /// Names of the parameters of one kind.
    func parameters(_ kind: String) -> [Parameter] { parameters.filter { $0.kind == kind } }
}
