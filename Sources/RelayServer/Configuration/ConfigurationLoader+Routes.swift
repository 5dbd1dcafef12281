import FCMClient
import Foundation
import RelayCore

/// The routes: their targets' secrets read, each validated, each problem noted with its key.
extension ConfigurationLoader {
    /// The valid routes; each route's problem (and each name used twice) is noted.
    func resolveRoutes(_ definitions: [RouteDefinition], key: String, _ problems: ConfigurationProblems) -> RouteTable {
        guard !definitions.isEmpty else {
            problems.note(
                ConfigurationError(
                    key: key, problem: "the list is empty, so no update would ever be relayed",
                    fix: "add a route, or remove the key to use the default PUSH_RC route"))
            return RouteTable.checking([RouteDefinition.default]).table
        }
        // A target's URL and secrets may come from the environment or a file: read here, so the route's own
        // validation sees values.
        let definitions = definitions.enumerated().map { index, definition in
            readTargetSecrets(definition, key: "\(key)[\(index)]", problems)
        }
        let (table, errors) = RouteTable.checking(definitions)
        let prefix = key.dropLast("routes".count)
        for error in errors { problems.note(ConfigurationError(key: prefix + error.key, problem: error.error.problem, fix: error.error.fix)) }
        for (index, definition) in zip(definitions.indices, definitions) {
            for target in definition.targets {
                for error in TargetKinds.kind(target.key)?.problems(target) ?? [] {
                    problems.note(ConfigurationError(key: "\(key)[\(index)].\(error.key)", problem: error.problem, fix: error.fix))
                }
            }
        }
        return table
    }

    /// A route whose target's secrets are values, read from the environment or files where given so.
    private func readTargetSecrets(_ definition: RouteDefinition, key: String, _ problems: ConfigurationProblems) -> RouteDefinition {
        var definition = definition
        definition.targets = definition.targets.map { target in
            target.readingSecrets { source, below in
                problems.check(nil) { () throws(ConfigurationError) in try read(source, key: "\(key).\(below)") }
            }
        }
        return definition
    }
}
