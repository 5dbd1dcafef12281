import FCMClient
import Foundation
import Logging
import RelayCore
import Yams

/// Reads the YAML file, lays the environment over it, and checks every setting, naming the key of any mistake.
public struct ConfigurationLoader: Sendable {
    public var environment: [String: String]

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.environment = environment
    }

    /// Loads the file at `path`.
    public func load(path: String) throws(ConfigurationError) -> RelaySettings {
        guard let text = BoundedFile.text(path) else {
            throw ConfigurationError(
                key: "(file)", problem: "\(path) cannot be read, or is not a regular file of at most 1 MiB",
                fix: "check the path given by --config or \(EnvironmentOverrides.configPath)")
        }
        return try load(yaml: text)
    }

    /// Loads configuration text; the environment overrides it.
    public func load(yaml: String) throws(ConfigurationError) -> RelaySettings {
        var root = try parse(yaml)
        try applyOverrides(to: &root)
        try checkKeys(root, schemaPath: "", keyPath: "")
        let file: ConfigurationFile
        do {
            file = try YAMLDecoder().decode(ConfigurationFile.self, from: root)
        } catch let error as DecodingError {
            throw describe(error)
        } catch {
            throw ConfigurationError(key: "(file)", problem: "it cannot be read", fix: "check it is valid YAML")
        }
        return try resolve(file)
    }

    private func parse(_ yaml: String) throws(ConfigurationError) -> Node {
        let node: Node?
        do {
            node = try Yams.compose(yaml: yaml)
        } catch {
            let line = (error as? YamlError).flatMap { if case .parser(_, _, let mark, _) = $0 { mark.line } else { nil } }
            throw ConfigurationError(
                key: "(file)", problem: "it is not valid YAML" + (line.map { " (line \($0))" } ?? ""),
                fix: "check indentation and quoting near that line")
        }
        guard let node else { return Node([(Node, Node)]()) }
        guard node.mapping != nil else {
            throw ConfigurationError(key: "(file)", problem: "the top level is not a mapping", fix: "start with keys such as server:, fcm:, routes:")
        }
        return node
    }

    private func applyOverrides(to root: inout Node) throws(ConfigurationError) {
        for override in EnvironmentOverrides.all {
            guard let value = environment[override.variable] else { continue }
            let node: Node
            if override.isList && override.key != "routes" {
                node = Node(value.split(whereSeparator: \.isWhitespace).map { Node(String($0)) })
            } else if override.isList {
                guard let parsed = try? Yams.compose(yaml: value), parsed.sequence != nil else {
                    throw ConfigurationError(
                        key: override.key, problem: "\(override.variable) is not a YAML or JSON list",
                        fix: "write it as a flow list, for example [{name: a, topic: PUSH_RC}]")
                }
                node = parsed
            } else {
                node = Node(value)
            }
            let parts = override.key.split(separator: ".").map(String.init)
            root = Self.setting(root, path: parts[...], to: node)
        }
    }

    private static func setting(_ node: Node, path: ArraySlice<String>, to value: Node) -> Node {
        guard let first = path.first else { return value }
        var mapping = node.mapping ?? Node.Mapping([])
        mapping[first] = setting(mapping[first] ?? Node([(Node, Node)]()), path: path.dropFirst(), to: value)
        return Node.mapping(mapping)
    }

    /// Refuses keys the file format does not have, so a typo is not silently ignored.
    private func checkKeys(_ node: Node, schemaPath: String, keyPath: String) throws(ConfigurationError) {
        if let sequence = node.sequence {
            for (index, item) in sequence.enumerated() {
                try checkKeys(item, schemaPath: schemaPath + "[]", keyPath: keyPath + "[\(index)]")
            }
            return
        }
        guard let mapping = node.mapping, let known = ConfigurationFile.knownKeys[schemaPath] else { return }
        for (keyNode, value) in mapping {
            let key = keyNode.string ?? ""
            // An empty key (`"": 1`, `? : 1`) must still be named: found by FuzzConfiguration.
            let shown = key.isEmpty ? "(an empty key)" : String(key.prefix(100))
            let path = keyPath.isEmpty ? shown : "\(keyPath).\(shown)"
            guard known.contains(key) else {
                let suggestion = known.first { $0.lowercased() == key.lowercased() }
                throw ConfigurationError(
                    key: path, problem: "'\(shown)' is not a known setting",
                    fix: suggestion.map { "did you mean '\($0)'?" } ?? "use one of " + known.sorted().joined(separator: ", "))
            }
            try checkKeys(value, schemaPath: schemaPath.isEmpty ? key : "\(schemaPath).\(key)", keyPath: path)
        }
    }

    private func describe(_ error: DecodingError) -> ConfigurationError {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.reduce("") { path, key in
                if let index = key.intValue { return "\(path)[\(index)]" }
                return path.isEmpty ? key.stringValue : "\(path).\(key.stringValue)"
            }
        }
        func source(_ key: String) -> String {
            EnvironmentOverrides.all.first { $0.key == key && environment[$0.variable] != nil }
                .map { " (set by \($0.variable))" } ?? ""
        }
        switch error {
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let key = path(context)
            return ConfigurationError(
                key: key, problem: "the value is not \(Self.kind(type))\(source(key))", fix: "give \(Self.kind(type)) here")
        case .dataCorrupted(let context):
            let key = path(context)
            return ConfigurationError(key: key, problem: "the value cannot be read\(source(key))", fix: "check its type and quoting")
        case .keyNotFound(let codingKey, let context):
            let key = [path(context), codingKey.stringValue].filter { !$0.isEmpty }.joined(separator: ".")
            return ConfigurationError(key: key, problem: "it is required", fix: "add \(codingKey.stringValue)")
        @unknown default:
            return ConfigurationError(key: "(file)", problem: "it cannot be read", fix: "check it against docs/configuration.md")
        }
    }

    private static func kind(_ type: Any.Type) -> String {
        switch type {
        case is Int.Type: "an integer"
        case is Bool.Type: "true or false"
        case is String.Type: "a string"
        default: "a \(String(describing: type).lowercased())"
        }
    }
}
