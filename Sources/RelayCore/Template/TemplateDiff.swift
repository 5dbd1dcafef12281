/// What a publish changed between two templates: the parameters added, removed or changed (and how), and the
/// conditions added, removed, changed or re-ordered. Moving a parameter between groups is no change: apps receive the
/// same values.
public struct TemplateDiff: Sendable, Equatable {
    public struct ParameterChange: Sendable, Equatable {
        public enum Kind: String, Sendable, Equatable {
            case added, removed, changed
        }
        public var name: String
        public var kind: Kind
        /// For `changed`: the default value, or the value type, is another.
        public var defaultChanged = false
        public var valueTypeChanged = false
        /// For `changed`: the conditions whose conditional value was added, removed or is another.
        public var conditions: Set<String> = []
    }

    public struct ConditionChange: Sendable, Equatable {
        public enum Kind: String, Sendable, Equatable {
            case added, removed, changed
        }
        public var name: String
        public var kind: Kind
    }

    /// Sorted by name.
    public var parameters: [ParameterChange]
    /// Sorted by name.
    public var conditions: [ConditionChange]
    /// The conditions both templates have are in another order: what any parameter using them resolves to may differ.
    public var conditionsReordered: Bool
    /// The version it is measured from, when its template said (the older one, for two merged).
    public var since: Int64? = nil

    public var isEmpty: Bool { parameters.isEmpty && conditions.isEmpty && !conditionsReordered }

    /// The names of the parameters that changed in any way, sorted.
    public var changedParameterNames: [String] { parameters.map(\.name) }

    /// The difference from `old` to `new`.
    public init(from old: RemoteConfigTemplate, to new: RemoteConfigTemplate) {
        var parameters: [ParameterChange] = []
        for (name, after) in new.parameters {
            guard let before = old.parameters[name] else {
                parameters.append(ParameterChange(name: name, kind: .added))
                continue
            }
            var change = ParameterChange(name: name, kind: .changed)
            change.defaultChanged = before.defaultValue != after.defaultValue
            change.valueTypeChanged = (before.valueType ?? "") != (after.valueType ?? "")
            for condition in Set(before.conditionalValues.keys).union(after.conditionalValues.keys)
            where before.conditionalValues[condition] != after.conditionalValues[condition] {
                change.conditions.insert(condition)
            }
            if change.defaultChanged || change.valueTypeChanged || !change.conditions.isEmpty { parameters.append(change) }
        }
        for name in old.parameters.keys where new.parameters[name] == nil {
            parameters.append(ParameterChange(name: name, kind: .removed))
        }
        self.parameters = parameters.sorted { $0.name < $1.name }

        var conditions: [ConditionChange] = []
        let before = Dictionary(old.conditions.map { ($0.name, $0.expression) }, uniquingKeysWith: { first, _ in first })
        let after = Dictionary(new.conditions.map { ($0.name, $0.expression) }, uniquingKeysWith: { first, _ in first })
        for (name, expression) in after {
            if let previous = before[name] {
                if previous != expression { conditions.append(ConditionChange(name: name, kind: .changed)) }
            } else {
                conditions.append(ConditionChange(name: name, kind: .added))
            }
        }
        for name in before.keys where after[name] == nil { conditions.append(ConditionChange(name: name, kind: .removed)) }
        self.conditions = conditions.sorted { $0.name < $1.name }
        let kept = Set(before.keys).intersection(after.keys)
        conditionsReordered = old.conditions.map(\.name).filter(kept.contains) != new.conditions.map(\.name).filter(kept.contains)
        since = old.versionNumber
    }

    /// What either diff changed, as one: a version measured from two versions its devices may have heard of last
    /// (the last one relayed, and the one before it) changed, for them, what it changed from either. A parameter
    /// added or removed in one and changed in the other is added or removed (its values reach anyone).
    public func merged(with other: TemplateDiff) -> TemplateDiff {
        var merged = self
        var parameters = Dictionary(uniqueKeysWithValues: self.parameters.map { ($0.name, $0) })
        for change in other.parameters {
            guard let mine = parameters[change.name] else {
                parameters[change.name] = change
                continue
            }
            guard mine.kind == .changed, change.kind == .changed else {
                if mine.kind == .changed { parameters[change.name] = change }
                continue
            }
            var both = mine
            both.defaultChanged = mine.defaultChanged || change.defaultChanged
            both.valueTypeChanged = mine.valueTypeChanged || change.valueTypeChanged
            both.conditions = mine.conditions.union(change.conditions)
            parameters[change.name] = both
        }
        merged.parameters = parameters.values.sorted { $0.name < $1.name }
        let known = Set(conditions.map(\.name))
        merged.conditions = (conditions + other.conditions.filter { !known.contains($0.name) }).sorted { $0.name < $1.name }
        merged.conditionsReordered = conditionsReordered || other.conditionsReordered
        merged.since = [since, other.since].compactMap { $0 }.min()
        return merged
    }

    /// The conditions a change is confined to, when every change is to conditional values of conditions that are
    /// themselves unchanged and in the same order; nil when the change can reach anyone (a default, a type, a
    /// parameter added or removed, a condition changed or re-ordered).
    public var confinedToConditions: Set<String>? {
        guard conditions.isEmpty, !conditionsReordered, !parameters.isEmpty else { return nil }
        var names: Set<String> = []
        for change in parameters {
            guard change.kind == .changed, !change.defaultChanged, !change.valueTypeChanged else { return nil }
            names.formUnion(change.conditions)
        }
        return names
    }
}
