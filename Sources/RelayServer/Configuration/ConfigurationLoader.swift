import FCMClient
import Foundation
import Logging
import RelayCore
import Yams

/// Reads the YAML file, lays environment variables and command-line flags over it (``ConfigurationSources``), and
/// checks every setting, naming the key of each mistake.
public struct ConfigurationLoader: Sendable {
    public var environment: [String: String]
    /// Command-line flags that give settings (`--delivery-spool-directory DIR`).
    public var arguments: [String]

    public init(environment: [String: String] = ProcessInfo.processInfo.environment, arguments: [String] = []) {
        self.environment = environment
        self.arguments = arguments
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

    /// Loads configuration text; the environment overrides it. Every problem is reported at once, as a compiler
    /// does: the error thrown carries them all (``ConfigurationError/all``).
    public func load(yaml: String) throws(ConfigurationError) -> RelaySettings {
        let file = try parse(yaml)  // text that is not YAML has nothing else to check
        let problems = ConfigurationProblems()
        let sources = ConfigurationSources(file: file, environment: environment, arguments: arguments)
        for error in sources.unknownFlags() { problems.note(error) }
        let (root, from) = sources.effective(file, problems)
        checkKeys(root, schemaPath: "", keyPath: "", problems)
        let settings = resolve(decode(root, problems), problems)
        problems.name(from)
        try problems.throwIfAny()
        return settings
    }

    /// The file's sections, each decoded on its own so that one with a wrong type does not hide the others'
    /// problems; a section that cannot be decoded is noted and left out.
    private func decode(_ root: Node, _ problems: ConfigurationProblems) -> ConfigurationFile {
        let decoder = YAMLDecoder()
        var kept = Node.Mapping([])
        for (key, value) in root.mapping ?? Node.Mapping([]) {
            do {
                _ = try decoder.decode(ConfigurationFile.self, from: Node([(key, value)]), userInfo: TargetKinds.userInfo)
                kept[key] = value
            } catch let error as DecodingError {
                problems.note(describe(error))
            } catch {
                problems.note(ConfigurationError(key: key.string ?? "(file)", problem: "it cannot be read", fix: "check it is valid YAML"))
            }
        }
        do {
            return try decoder.decode(ConfigurationFile.self, from: Node.mapping(kept), userInfo: TargetKinds.userInfo)
        } catch {
            problems.note(ConfigurationError(key: "(file)", problem: "it cannot be read", fix: "check it is valid YAML"))
            return ConfigurationFile()
        }
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

    /// Refuses keys the file format does not have, so a typo is not silently ignored.
    private func checkKeys(_ node: Node, schemaPath: String, keyPath: String, _ problems: ConfigurationProblems) {
        if let sequence = node.sequence {
            for (index, item) in sequence.enumerated() {
                checkKeys(item, schemaPath: schemaPath + "[]", keyPath: keyPath + "[\(index)]", problems)
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
                let suggestion = Suggestion.closest(to: key, in: known)
                problems.note(
                    ConfigurationError(
                        key: path, problem: "'\(shown)' is not a known setting",
                        fix: suggestion.map { "did you mean '\($0)'?" } ?? "use one of " + known.sorted().joined(separator: ", ")))
                continue
            }
            checkKeys(value, schemaPath: schemaPath.isEmpty ? key : "\(schemaPath).\(key)", keyPath: path, problems)
        }
    }

    private func describe(_ error: DecodingError) -> ConfigurationError {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.reduce("") { path, key in
                if let index = key.intValue { return "\(path)[\(index)]" }
                return path.isEmpty ? key.stringValue : "\(path).\(key.stringValue)"
            }
        }
        switch error {
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let key = path(context)
            return ConfigurationError(
                key: key, problem: "the value is not \(Self.kind(type))", fix: "give \(Self.kind(type)) here")
        case .dataCorrupted(let context):
            let key = path(context)
            return ConfigurationError(key: key, problem: "the value cannot be read", fix: "check its type and quoting")
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
