import Configuration
import Yams

/// Where settings come from, the first that gives one wins: command-line flags (`--delivery-spool-directory DIR`, `--port 9000`),
/// then `RC_RELAY_*` environment variables, then the file. swift-configuration's providers and reader do the
/// layering; rc-relay's own checks run on the result (``ConfigurationLoader``).
///
/// What the library's values cannot hold stays in the file's tree as parsed: lists of mappings (`routes`,
/// `projects`, secrets given as `{env: NAME}` or `{file: PATH}`). A flag or variable for such a list replaces it
/// whole, with plain values.
struct ConfigurationSources {
    /// Where one setting's value came from, for error messages: a flag, a variable, or the file.
    enum Source: Equatable {
        case flag(String)
        case variable(String)
        case file

        var label: String? {
            switch self {
            case .flag(let flag): "--\(flag)"
            case .variable(let variable): variable
            case .file: nil
            }
        }
    }

    let reader: ConfigReader
    let environment: [String: String]
    /// The flags given, by name (without `--`).
    let flags: Set<String>

    /// `file` is the parsed file; `arguments` the command-line flags that name settings (`--key value`, `--key=value`).
    init(file: Node, environment: [String: String], arguments: [String]) {
        self.environment = environment
        self.flags = Set(arguments.filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2).prefix { $0 != "=" }) })
        let secret: Set<String> = Set(EnvironmentOverrides.all.filter(\.isSecret).map(\.variable))
        reader = ConfigReader(providers: [
            CommandLineArgumentsProvider(
                arguments: ["rc-relay"] + arguments,
                secretsSpecifier: .specific(Set(EnvironmentOverrides.all.filter(\.isSecret).map { "--\($0.flag)" }))
            ).mapKeys(EnvironmentOverrides.flagKey),
            EnvironmentVariablesProvider(environmentVariables: environment, secretsSpecifier: .specific(secret), arraySeparator: " ")
                .mapKeys(EnvironmentOverrides.variableKey),
            InMemoryProvider(name: "file", values: Self.values(of: file)),
        ])
    }

    /// The file's tree with each setting a flag or a variable gives put in its place, and where each came from.
    func effective(_ file: Node, _ problems: ConfigurationProblems) -> (tree: Node, sources: [String: Source]) {
        var tree = file
        var sources: [String: Source] = [:]
        for setting in EnvironmentOverrides.all {
            let source = source(of: setting)
            guard source != .file else { continue }
            sources[setting.key] = source
            let node: Node
            if setting.key == "routes" {
                // A YAML or JSON flow list of route mappings: beyond the library's values, so read here.
                guard let text = environment[setting.variable], let parsed = try? Yams.compose(yaml: text), parsed.sequence != nil else {
                    problems.note(
                        ConfigurationError(
                            key: setting.key, problem: "\(setting.variable) is not a YAML or JSON list",
                            fix: "write it as a flow list, for example [{name: a, topic: PUSH_RC}]"))
                    continue
                }
                node = parsed
            } else if setting.isList {
                // Space-separated in a variable (any whitespace), or one flag's several values.
                let values = reader.stringArray(forKey: ConfigKey(setting.key), isSecret: setting.isSecret) ?? []
                node = Node(values.flatMap { $0.split(whereSeparator: \.isWhitespace) }.map { Node(String($0)) })
            } else {
                // A bare flag (`--fcm-validate-only`) is a true boolean to the command-line provider, not a string.
                let key = ConfigKey(setting.key)
                let text = reader.string(forKey: key, isSecret: setting.isSecret) ?? reader.bool(forKey: key).map { String($0) }
                node = Node(text ?? "")
            }
            tree = Self.setting(tree, path: setting.key.split(separator: ".").map(String.init)[...], to: node)
        }
        return (tree, sources)
    }

    /// Flags that name no setting, each with a suggestion.
    func unknownFlags() -> [ConfigurationError] {
        let known = Set(EnvironmentOverrides.all.filter { $0.key != "routes" }.map(\.flag))
        return flags.subtracting(known).sorted().map { flag in
            let suggestion = Suggestion.closest(to: flag, in: known)
            return ConfigurationError(
                key: "--\(flag)", problem: "it is not a setting",
                fix: suggestion.map { "did you mean --\($0)?" }
                    ?? "name a setting as its variable is named, in lower case: RC_RELAY_DELIVERY_SPOOL_DIRECTORY is --delivery-spool-directory")
        }
    }

    private func source(of setting: EnvironmentOverrides.Override) -> Source {
        if setting.key != "routes", flags.contains(setting.flag) { return .flag(setting.flag) }
        if environment[setting.variable] != nil { return .variable(setting.variable) }
        return .file
    }

    /// The file's plain values and lists of plain values, for the reader; mappings and lists of them stay in the tree.
    private static func values(of file: Node) -> [AbsoluteConfigKey: ConfigValue] {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for setting in EnvironmentOverrides.all where setting.key != "routes" {
            var node: Node? = file
            for part in setting.key.split(separator: ".") { node = node?.mapping?[String(part)] }
            guard let node else { continue }
            if let text = node.scalar?.string {
                values[AbsoluteConfigKey(setting.key.split(separator: ".").map(String.init))] = ConfigValue(.string(text), isSecret: setting.isSecret)
            } else if let items = node.sequence, items.allSatisfy({ $0.scalar != nil }) {
                values[AbsoluteConfigKey(setting.key.split(separator: ".").map(String.init))] = ConfigValue(
                    .stringArray(items.compactMap(\.scalar?.string)), isSecret: setting.isSecret)
            }
        }
        return values
    }

    private static func setting(_ node: Node, path: ArraySlice<String>, to value: Node) -> Node {
        guard let first = path.first else { return value }
        var mapping = node.mapping ?? Node.Mapping([])
        mapping[first] = setting(mapping[first] ?? Node([(Node, Node)]()), path: path.dropFirst(), to: value)
        return Node.mapping(mapping)
    }
}

/// The known name closest to a mistyped one, if it is close enough to be what was meant.
enum Suggestion {
    static func closest(to name: String, in known: some Collection<String>) -> String? {
        if let sameLetters = known.first(where: { $0.lowercased() == name.lowercased() }) { return sameLetters }
        // A name with a section it does not have, or without the one it has (`--server-port`, `--spool-directory`).
        if let shorter = known.filter({ name.hasSuffix("-" + $0) }).max(by: { $0.count < $1.count }) { return shorter }
        if let longer = known.filter({ $0.hasSuffix("-" + name) }).min(by: { $0.count < $1.count }) { return longer }
        let scored = known.map { ($0, distance($0.lowercased(), name.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, name.count / 3) else { return nil }
        return best.0
    }

    /// Levenshtein distance.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        guard !a.isEmpty else { return b.count }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }
}
