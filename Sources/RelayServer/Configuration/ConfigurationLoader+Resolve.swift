import DeliveryEngine
import FCMClient
import Foundation
import Logging
import RelayCore

extension ConfigurationLoader {
    /// Applies defaults, reads secrets and the key file, and validates every route.
    func resolve(_ file: ConfigurationFile) throws(ConfigurationError) -> RelaySettings {
        let port = file.server?.port ?? RelaySettings.defaultPort
        guard (0...65_535).contains(port) else {
            throw ConfigurationError(key: "server.port", problem: "\(port) is not a TCP port", fix: "use 1 to 65535 (0 picks a free port)")
        }
        let maxBody = file.server?.maxBodyBytes ?? RelaySettings.defaultMaxBodyBytes
        guard (1024...10_485_760).contains(maxBody) else {
            throw ConfigurationError(
                key: "server.maxBodyBytes", problem: "\(maxBody) is outside 1024 to 10485760", fix: "template versions are small; 65536 is plenty")
        }
        let tolerance = file.webhook?.toleranceSeconds ?? 300
        guard (1...3600).contains(tolerance) else {
            throw ConfigurationError(
                key: "webhook.toleranceSeconds", problem: "\(tolerance) is outside 1 to 3600", fix: "use 300, the Standard Webhooks default")
        }
        let authText = file.webhook?.auth ?? "hmac"
        guard let auth = RelaySettings.WebhookAuth(rawValue: authText) else {
            throw ConfigurationError(
                key: "webhook.auth", problem: "'\(authText)' is not an authentication mode",
                fix: "use hmac (Standard Webhooks), oidc (Google ID tokens, as Eventarc sends) or both")
        }
        let secrets = auth.needsHMAC || file.webhook?.secrets != nil ? try resolveSecrets(file.webhook?.secrets ?? []) : []
        let oidc = auth.needsOIDC || file.oidc != nil ? try resolveOIDC(file.oidc) : nil
        let credentials = try resolveCredentials(file.fcm)
        let baseURL = file.fcm?.baseURL ?? RelaySettings.defaultFCMBaseURL
        guard let url = URL(string: baseURL), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw ConfigurationError(key: "fcm.baseURL", problem: "'\(baseURL)' is not an http(s) URL", fix: "use \(RelaySettings.defaultFCMBaseURL)")
        }
        let timeout = file.fcm?.timeoutSeconds ?? 10
        guard (1...120).contains(timeout) else {
            throw ConfigurationError(key: "fcm.timeoutSeconds", problem: "\(timeout) is outside 1 to 120", fix: "use 10")
        }
        let levelText = file.log?.level ?? "info"
        guard let level = Logger.Level(rawValue: levelText.lowercased()) else {
            throw ConfigurationError(
                key: "log.level", problem: "'\(levelText)' is not a log level", fix: "use trace, debug, info, notice, warning, error or critical")
        }
        let formatText = file.log?.format ?? "text"
        guard let format = RelaySettings.LogFormat(rawValue: formatText) else {
            throw ConfigurationError(key: "log.format", problem: "'\(formatText)' is not a log format", fix: "use text or json")
        }
        let routes = try resolveRoutes(file.routes ?? [RouteDefinition.default], key: "routes")
        let projects = try resolveProjects(file, credentials: credentials, routes: routes)
        return RelaySettings(
            host: file.server?.host ?? RelaySettings.defaultHost, port: port,
            maxBodyBytes: maxBody, trustedProxies: try resolveTrustedProxies(file.server?.trustedProxies),
            shutdownDelay: try duration(file.server?.shutdownDelaySeconds, key: "server.shutdownDelaySeconds", default: 0, range: 0...300),
            idleTimeout: try duration(file.server?.idleTimeoutSeconds, key: "server.idleTimeoutSeconds", default: 30, range: 0.1...3600),
            requestReadTimeout: try duration(
                file.server?.requestReadTimeoutSeconds, key: "server.requestReadTimeoutSeconds", default: 10, range: 0.1...600),
            readinessCache: try duration(file.server?.readinessCacheSeconds, key: "server.readinessCacheSeconds", default: 5, range: 0...300),
            adminTokens: try resolveAdminTokens(file.admin?.tokens ?? []),
            adminHost: file.admin?.host ?? "127.0.0.1", adminPort: try resolveAdminPort(file.admin?.port, main: port),
            historySize: try count(file.delivery?.historySize, key: "delivery.historySize", default: 1000, range: 1...100_000),
            maxQueuedPings: try count(file.delivery?.maxQueuedPings, key: "delivery.maxQueuedPings", default: 10_000, range: 1...10_000_000),
            webhookAuth: auth, verifier: StandardWebhookVerifier(secrets: secrets, tolerance: .seconds(tolerance)), oidc: oidc,
            projects: projects, fcmBaseURL: baseURL,
            validateOnly: file.fcm?.validateOnly ?? false, fcmTimeout: .seconds(timeout),
            retryPolicy: try resolveRetryPolicy(file.delivery), outboundConcurrency: try resolveConcurrency(file.delivery),
            answerWithin: try duration(file.delivery?.answerWithinSeconds, key: "delivery.answerWithinSeconds", default: 5, range: 0.05...600),
            spoolDirectory: file.delivery?.spoolDirectory,
            drainGrace: try duration(file.delivery?.drainSeconds, key: "delivery.drainSeconds", default: 20, range: 0...600),
            dedupWindow: try duration(file.delivery?.dedupWindowSeconds, key: "delivery.dedupWindowSeconds", default: 600, range: 0...86_400),
            dedupMaxEvents: try dedupMaxEvents(file.delivery),
            logLevel: level,
            logFormat: format, logPings: file.log?.pings ?? false)
    }

    private func resolveRoutes(_ definitions: [RouteDefinition], key: String) throws(ConfigurationError) -> RouteTable {
        guard !definitions.isEmpty else {
            throw ConfigurationError(
                key: key, problem: "the list is empty, so no update would ever be relayed",
                fix: "add a route, or remove the key to use the default PUSH_RC route")
        }
        do {
            return try RouteTable(definitions)
        } catch {
            let prefix = key.dropLast("routes".count)
            throw ConfigurationError(key: prefix + error.key, problem: error.error.problem, fix: error.error.fix)
        }
    }

    /// One project from `fcm`, or each of `projects` with its own credentials and routes (the top-level ones by default).
    private func resolveProjects(
        _ file: ConfigurationFile, credentials: RelaySettings.Credentials, routes: RouteTable
    ) throws(ConfigurationError) -> [RelaySettings.ProjectSettings] {
        guard let entries = file.projects else {
            var id = file.fcm?.project
            if id == nil, case .keyFile(_, let key) = credentials { id = key.projectID }
            if let id { try checkProjectID(id, key: "fcm.project") }
            return [.init(id: id, credentials: credentials, routes: routes)]
        }
        guard !entries.isEmpty else {
            throw ConfigurationError(
                key: "projects", problem: "the list is empty", fix: "list each Firebase project, or remove the key and use fcm.project")
        }
        guard file.fcm?.project == nil else {
            throw ConfigurationError(
                key: "fcm.project", problem: "it is set together with projects", fix: "give each project's id in projects[].id instead")
        }
        var projects: [RelaySettings.ProjectSettings] = []
        for (index, entry) in entries.enumerated() {
            guard let id = entry.id else {
                throw ConfigurationError(key: "projects[\(index)].id", problem: "it is required", fix: "set the Firebase project id")
            }
            try checkProjectID(id, key: "projects[\(index)].id")
            guard !projects.contains(where: { $0.id == id }) else {
                throw ConfigurationError(key: "projects[\(index)].id", problem: "'\(id)' is listed twice", fix: "list each project once")
            }
            var own = credentials
            if let path = entry.credentialsFile {
                do {
                    own = .keyFile(path: path, key: try ServiceAccountKey(contentsOf: path))
                } catch {
                    throw ConfigurationError(
                        key: "projects[\(index)].credentialsFile", problem: "\(error)", fix: "download this project's key in the Firebase console")
                }
            }
            let table =
                try entry.routes.map { definitions throws(ConfigurationError) in
                    try resolveRoutes(definitions, key: "projects[\(index)].routes")
                } ?? routes
            projects.append(.init(id: id, credentials: own, routes: table))
        }
        return projects
    }

    private func checkProjectID(_ id: String, key: String) throws(ConfigurationError) {
        guard !id.isEmpty, !id.contains("/"), !id.contains(" ") else {
            throw ConfigurationError(key: key, problem: "'\(id)' is not a project id", fix: "use the Firebase project id, e.g. my-app-1234")
        }
    }

    /// Application Default Credentials order: the configured key file, GOOGLE_APPLICATION_CREDENTIALS, the metadata server.
    private func resolveCredentials(_ fcm: ConfigurationFile.FCM?) throws(ConfigurationError) -> RelaySettings.Credentials {
        if let path = fcm?.credentialsFile ?? environment["GOOGLE_APPLICATION_CREDENTIALS"] {
            do {
                return .keyFile(path: path, key: try ServiceAccountKey(contentsOf: path))
            } catch {
                throw ConfigurationError(
                    key: "fcm.credentialsFile", problem: "\(error)",
                    fix: "download a new key in the Firebase console under Project settings › Service accounts")
            }
        }
        let base = fcm?.metadataURL ?? environment["GCE_METADATA_HOST"].map { "http://\($0)" } ?? MetadataServerExchange.defaultBaseURL
        guard let url = URL(string: base), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw ConfigurationError(
                key: "fcm.metadataURL", problem: "'\(base)' is not an http(s) URL",
                fix: "leave it unset on Google Cloud (\(MetadataServerExchange.defaultBaseURL))")
        }
        return .metadataServer(baseURL: base)
    }

    private func resolveSecrets(_ sources: [SecretSource]) throws(ConfigurationError) -> [WebhookSecret] {
        guard !sources.isEmpty else {
            throw ConfigurationError(
                key: "webhook.secrets", problem: "no webhook secret is configured, so no request could be verified",
                fix: "add one, e.g. - env: RC_RELAY_WEBHOOK_SECRET (generate with: echo whsec_$(head -c32 /dev/urandom | base64))")
        }
        var secrets: [WebhookSecret] = []
        for (index, source) in sources.enumerated() {
            let key = "webhook.secrets[\(index)]"
            let text = try read(source, key: key)
            do {
                secrets.append(try WebhookSecret(text))
            } catch {
                throw ConfigurationError(
                    key: key, problem: "the secret is not whsec_ followed by base64 of 16 or more bytes",
                    fix: "copy the whole secret, whsec_ prefix included")
            }
        }
        return secrets
    }

    /// A secret's text from its value, environment variable or file.
    func read(_ source: SecretSource, key: String) throws(ConfigurationError) -> String {
        let text: String
        switch source {
        case .value(let value):
            text = value
        case .environment(let name):
            guard let value = environment[name], !value.isEmpty else {
                throw ConfigurationError(
                    key: key, problem: "the environment variable \(name) is not set", fix: "set \(name), or point this entry at a file")
            }
            text = value
        case .file(let path):
            guard let value = BoundedFile.text(path) else {
                throw ConfigurationError(
                    key: key, problem: "the file \(path) cannot be read, or is not a regular file of at most 1 MiB",
                    fix: "check the path and that rc-relay's user may read it")
            }
            text = value.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return text
    }
}
