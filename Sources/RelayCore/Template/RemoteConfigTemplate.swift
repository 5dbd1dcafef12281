import Foundation

/// A Remote Config template as far as a change to it matters: its conditions in priority order, and every parameter
/// (parameter groups included: keys are unique across the template) with its default, conditional values and type.
///
/// Read leniently, as Firebase adds fields and value kinds: an unknown value kind is kept as its JSON text, so a change
/// to it is still a change. Values are compared as JSON, never interpreted.
public struct RemoteConfigTemplate: Sendable, Equatable {
    public struct Condition: Sendable, Equatable {
        public var name: String
        public var expression: String
    }

    /// A parameter's value: `{value}`, `{useInAppDefault: true}`, or another kind (personalization, rollout, kinds
    /// added later) kept as canonical JSON.
    public enum Value: Sendable, Equatable {
        case value(String)
        case useInAppDefault
        case other(String)
    }

    public struct Parameter: Sendable, Equatable {
        public var defaultValue: Value?
        public var conditionalValues: [String: Value]
        public var valueType: String?
        /// The parameter group it sits in, if any (moving between groups changes nothing apps receive).
        public var group: String?
    }

    public var conditions: [Condition]
    public var parameters: [String: Parameter]
    /// The template's own version number, when it says.
    public var versionNumber: Int64?

    /// The largest template read: Remote Config's own limit is far below this.
    public static let maximumBytes = 4 * 1024 * 1024
    /// Parameters and conditions read at most (Remote Config allows 2,000 parameters and 500 conditions).
    public static let maximumParameters = 10_000
    public static let maximumConditions = 2_000

    public init(conditions: [Condition] = [], parameters: [String: Parameter] = [:], versionNumber: Int64? = nil) {
        (self.conditions, self.parameters, self.versionNumber) = (conditions, parameters, versionNumber)
    }

    /// Reads Google's JSON; anything that is not a template of Google's shape is a ``TemplateError``.
    public init(json: Data) throws(TemplateError) {
        guard json.count <= Self.maximumBytes else { throw .tooLarge(json.count) }
        guard let object = (try? JSONSerialization.jsonObject(with: json)) as? [String: Any] else { throw .notAnObject }
        var conditions: [Condition] = []
        if let listed = object["conditions"] {
            guard let list = listed as? [[String: Any]] else { throw .malformed("conditions is not a list of objects") }
            guard list.count <= Self.maximumConditions else { throw .malformed("more than \(Self.maximumConditions) conditions") }
            for item in list {
                guard let name = item["name"] as? String, !name.isEmpty else { throw .malformed("a condition has no name") }
                conditions.append(Condition(name: name, expression: item["expression"] as? String ?? ""))
            }
        }
        var parameters: [String: Parameter] = [:]
        func add(_ listed: Any?, group: String?) throws(TemplateError) {
            guard let listed else { return }
            guard let map = listed as? [String: Any] else { throw .malformed("parameters is not an object") }
            for (key, value) in map {
                guard let fields = value as? [String: Any] else { throw .malformed("parameter '\(key.prefix(100))' is not an object") }
                guard parameters[key] == nil else { throw .malformed("parameter '\(key.prefix(100))' appears twice") }
                guard parameters.count < Self.maximumParameters else { throw .malformed("more than \(Self.maximumParameters) parameters") }
                parameters[key] = try Self.parameter(fields, key: key, group: group)
            }
        }
        try add(object["parameters"], group: nil)
        if let groups = object["parameterGroups"] {
            guard let groups = groups as? [String: Any] else { throw .malformed("parameterGroups is not an object") }
            for (name, group) in groups {
                guard let group = group as? [String: Any] else { throw .malformed("parameter group '\(name.prefix(100))' is not an object") }
                try add(group["parameters"], group: name)
            }
        }
        let version = (object["version"] as? [String: Any])?["versionNumber"]
        self.init(
            conditions: conditions, parameters: parameters,
            versionNumber: (version as? String).flatMap { Int64($0) } ?? (version as? NSNumber).map { $0.int64Value })
    }

    private static func parameter(_ fields: [String: Any], key: String, group: String?) throws(TemplateError) -> Parameter {
        var conditional: [String: Value] = [:]
        if let listed = fields["conditionalValues"] {
            guard let map = listed as? [String: Any] else {
                throw .malformed("parameter '\(key.prefix(100))' has conditionalValues that are not an object")
            }
            for (condition, value) in map { conditional[condition] = try Self.value(value, key: key) }
        }
        return Parameter(
            defaultValue: try fields["defaultValue"].map { value throws(TemplateError) in try Self.value(value, key: key) },
            conditionalValues: conditional, valueType: fields["valueType"] as? String, group: group)
    }

    private static func value(_ any: Any, key: String) throws(TemplateError) -> Value {
        guard let object = any as? [String: Any] else { throw .malformed("a value of parameter '\(key.prefix(100))' is not an object") }
        if object.count == 1, let text = object["value"] as? String { return .value(text) }
        if object.count == 1, object["useInAppDefault"] as? Bool == true { return .useInAppDefault }
        let canonical = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return .other(String(decoding: canonical, as: UTF8.self))
    }
}

/// Why a template could not be read.
public enum TemplateError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge(Int)
    case notAnObject
    case malformed(String)

    public var description: String {
        switch self {
        case .tooLarge(let bytes): "the template is \(bytes) bytes, over the \(RemoteConfigTemplate.maximumBytes) read"
        case .notAnObject: "the template is not a JSON object"
        case .malformed(let reason): "the template is not of Google's shape: \(reason)"
        }
    }
}
