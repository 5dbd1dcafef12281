import FCMClient
import Foundation
import RelayCore

/// The routes: their HTTP targets' secrets read, each validated, each problem noted with its key.
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
        // An HTTP target's URL and secrets may come from the environment or a file: read here, so the route's own
        // validation sees values.
        let definitions = definitions.enumerated().map { index, definition in
            readWebhookSecrets(definition, key: "\(key)[\(index)].webhook", problems)
        }
        let (table, errors) = RouteTable.checking(definitions)
        let prefix = key.dropLast("routes".count)
        for error in errors { problems.note(ConfigurationError(key: prefix + error.key, problem: error.error.problem, fix: error.error.fix)) }
        for (index, route) in zip(definitions.indices, definitions) {
            guard let caFile = route.webhook?.caFile, !caFile.isEmpty, BoundedFile.text(caFile)?.contains("-----BEGIN CERTIFICATE-----") != true
            else {
                continue
            }
            problems.note(
                ConfigurationError(
                    key: "\(key)[\(index)].webhook.caFile", problem: "\(caFile) cannot be read as PEM certificates",
                    fix: "point it at the certificate (PEM, -----BEGIN CERTIFICATE-----) the receiver's chains to"))
        }
        return table
    }

    /// A route whose HTTP target's URL and secrets are values, read from the environment or files where given so.
    private func readWebhookSecrets(_ definition: RouteDefinition, key: String, _ problems: ConfigurationProblems) -> RouteDefinition {
        guard var webhook = definition.webhook else { return definition }
        var definition = definition
        if let url = webhook.url {
            webhook.url =
                problems.check(nil) { () throws(ConfigurationError) in SecretSource.value(try read(url, key: key + ".url")) }
                ?? .value("")
        }
        webhook.secrets = webhook.secrets?.enumerated().map { index, source in
            problems.check(nil) { () throws(ConfigurationError) in SecretSource.value(try read(source, key: "\(key).secrets[\(index)]")) }
                ?? .value("")
        }
        definition.webhook = webhook
        return definition
    }
}
