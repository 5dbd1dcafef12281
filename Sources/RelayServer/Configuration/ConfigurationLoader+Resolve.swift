import DeliveryEngine
import FCMClient
import Foundation
import Logging
import RelayCore

extension ConfigurationLoader {
    /// Applies defaults, reads secrets and the key file, and validates every route. Each check that fails is noted
    /// in `problems` and given a stand-in, so the checks after it still run: the settings returned are only good when
    /// `problems` stays empty.
    func resolve(_ file: ConfigurationFile, _ problems: ConfigurationProblems) -> RelaySettings {
        let port = problems.check(RelaySettings.defaultPort) { () throws(ConfigurationError) in
            let port = file.server?.port ?? RelaySettings.defaultPort
            guard (0...65_535).contains(port) else {
                throw ConfigurationError(key: "server.port", problem: "\(port) is not a TCP port", fix: "use 1 to 65535 (0 picks a free port)")
            }
            return port
        }
        let maxBody = problems.check(RelaySettings.defaultMaxBodyBytes) { () throws(ConfigurationError) in
            let maxBody = file.server?.maxBodyBytes ?? RelaySettings.defaultMaxBodyBytes
            guard (1024...10_485_760).contains(maxBody) else {
                throw ConfigurationError(
                    key: "server.maxBodyBytes", problem: "\(maxBody) is outside 1024 to 10485760", fix: "template versions are small; 65536 is plenty"
                )
            }
            return maxBody
        }
        let tolerance = problems.check(300) { () throws(ConfigurationError) in
            let tolerance = file.webhook?.toleranceSeconds ?? 300
            guard (1...3600).contains(tolerance) else {
                throw ConfigurationError(
                    key: "webhook.toleranceSeconds", problem: "\(tolerance) is outside 1 to 3600", fix: "use 300, the Standard Webhooks default")
            }
            return tolerance
        }
        let auth = problems.check(RelaySettings.WebhookAuth.hmac) { () throws(ConfigurationError) in
            // Poll-only mode needs no webhook section: a service account and a project are the whole set-up.
            let authText = file.webhook?.auth ?? (file.webhook == nil && file.oidc == nil && file.poll?.intervalSeconds != nil ? "none" : "hmac")
            guard let auth = RelaySettings.WebhookAuth(rawValue: authText) else {
                throw ConfigurationError(
                    key: "webhook.auth", problem: "'\(authText)' is not an authentication mode",
                    fix: "use hmac (Standard Webhooks), oidc (Google ID tokens, as Eventarc sends), both, any (either proves it) or none (poll only)")
            }
            return auth
        }
        if auth == .none, file.poll?.intervalSeconds == nil {
            problems.note(
                ConfigurationError(
                    key: "webhook.auth", problem: "none takes no webhooks, and poll.intervalSeconds is not set, so nothing would ever be relayed",
                    fix: "set poll.intervalSeconds (poll-only mode), or choose hmac, oidc, both or any"))
        }
        let secrets =
            auth.needsHMAC || file.webhook?.secrets != nil ? resolveSecrets(file.webhook?.secrets ?? [], problems) : []
        let oidc = auth.needsOIDC || file.oidc != nil ? problems.check(nil) { () throws(ConfigurationError) in try resolveOIDC(file.oidc) } : nil
        let credentials = problems.check(RelaySettings.Credentials.metadataServer(baseURL: MetadataServerExchange.defaultBaseURL)) {
            () throws(ConfigurationError) in try resolveCredentials(file.fcm)
        }
        func baseURL(_ value: String?, key: String, default fallback: String) -> String {
            problems.check(fallback) { () throws(ConfigurationError) in
                let text = value ?? fallback
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                    throw ConfigurationError(key: key, problem: "'\(text)' is not an http(s) URL", fix: "use \(fallback)")
                }
                return text
            }
        }
        func timeoutSeconds(_ value: Int?, key: String) -> Int {
            problems.check(10) { () throws(ConfigurationError) in
                let timeout = value ?? 10
                guard (1...120).contains(timeout) else {
                    throw ConfigurationError(key: key, problem: "\(timeout) is outside 1 to 120", fix: "use 10")
                }
                return timeout
            }
        }
        let fcmURL = baseURL(file.fcm?.baseURL, key: "fcm.baseURL", default: RelaySettings.defaultFCMBaseURL)
        let timeout = timeoutSeconds(file.fcm?.timeoutSeconds, key: "fcm.timeoutSeconds")
        let remoteConfigURL = baseURL(file.remoteConfig?.baseURL, key: "remoteConfig.baseURL", default: RelaySettings.defaultRemoteConfigBaseURL)
        let remoteConfigTimeout = timeoutSeconds(file.remoteConfig?.timeoutSeconds, key: "remoteConfig.timeoutSeconds")
        let level = problems.check(Logger.Level.info) { () throws(ConfigurationError) in
            let levelText = file.log?.level ?? "info"
            guard let level = Logger.Level(rawValue: levelText.lowercased()) else {
                throw ConfigurationError(
                    key: "log.level", problem: "'\(levelText)' is not a log level", fix: "use trace, debug, info, notice, warning, error or critical")
            }
            return level
        }
        let format = problems.check(RelaySettings.LogFormat.text) { () throws(ConfigurationError) in
            let formatText = file.log?.format ?? "text"
            guard let format = RelaySettings.LogFormat(rawValue: formatText) else {
                throw ConfigurationError(key: "log.format", problem: "'\(formatText)' is not a log format", fix: "use text or json")
            }
            return format
        }
        let routes = resolveRoutes(file.routes ?? [RouteDefinition.default], key: "routes", problems)
        let projects = resolveProjects(file, credentials: credentials, routes: routes, problems)
        func duration(_ value: Double?, _ key: String, _ fallback: Double, _ range: ClosedRange<Double>) -> Duration {
            problems.check(.seconds(fallback)) { () throws(ConfigurationError) in try self.duration(value, key: key, default: fallback, range: range)
            }
        }
        func count(_ value: Int?, _ key: String, _ fallback: Int, _ range: ClosedRange<Int>) -> Int {
            problems.check(fallback) { () throws(ConfigurationError) in try self.count(value, key: key, default: fallback, range: range) }
        }
        let poll: RelaySettings.PollSettings? = file.poll?.intervalSeconds.map { interval in
            RelaySettings.PollSettings(
                interval: duration(interval, "poll.intervalSeconds", 300, 10...86_400),
                grace: duration(file.poll?.graceSeconds, "poll.graceSeconds", 60, 0...86_400))
        }
        if file.poll != nil, file.poll?.intervalSeconds == nil {
            problems.note(
                ConfigurationError(
                    key: "poll.intervalSeconds", problem: "the poll section is there but says no interval, so nothing is polled",
                    fix: "set it (300 reads one small version list per project every 5 minutes), or remove the section"))
        }
        var settings = RelaySettings(
            host: file.server?.host ?? RelaySettings.defaultHost, port: port,
            maxBodyBytes: maxBody,
            trustedProxies: problems.check(TrustedProxies()) { () throws(ConfigurationError) in
                try resolveTrustedProxies(file.server?.trustedProxies)
            },
            shutdownDelay: duration(file.server?.shutdownDelaySeconds, "server.shutdownDelaySeconds", 0, 0...300),
            idleTimeout: duration(file.server?.idleTimeoutSeconds, "server.idleTimeoutSeconds", 30, 0.1...3600),
            requestReadTimeout: duration(file.server?.requestReadTimeoutSeconds, "server.requestReadTimeoutSeconds", 10, 0.1...600),
            readinessCache: duration(file.server?.readinessCacheSeconds, "server.readinessCacheSeconds", 5, 0...300),
            adminTokens: problems.check([]) { () throws(ConfigurationError) in try resolveAdminTokens(file.admin?.tokens ?? []) },
            adminHost: file.admin?.host ?? "127.0.0.1",
            adminPort: problems.check(nil) { () throws(ConfigurationError) in try resolveAdminPort(file.admin?.port, main: port) },
            historySize: count(file.delivery?.historySize, "delivery.historySize", 1000, 1...100_000),
            maxQueuedPings: count(file.delivery?.maxQueuedPings, "delivery.maxQueuedPings", 10_000, 1...10_000_000),
            webhookAuth: auth, verifier: StandardWebhookVerifier(secrets: secrets, tolerance: .seconds(tolerance)), oidc: oidc,
            projects: projects, fcmBaseURL: fcmURL,
            validateOnly: file.fcm?.validateOnly ?? false, fcmTimeout: .seconds(timeout),
            remoteConfigBaseURL: remoteConfigURL, remoteConfigTimeout: .seconds(remoteConfigTimeout), poll: poll,
            retryPolicy: problems.check(RetryPolicy()) { () throws(ConfigurationError) in try resolveRetryPolicy(file.delivery) },
            outboundConcurrency: problems.check(64) { () throws(ConfigurationError) in try resolveConcurrency(file.delivery) },
            messagesPerSecond: problems.check(1_000) { () throws(ConfigurationError) in try resolvePace(file.delivery) },
            answerWithin: duration(file.delivery?.answerWithinSeconds, "delivery.answerWithinSeconds", 5, 0.05...600),
            spoolDirectory: file.delivery?.spoolDirectory,
            store: problems.check(nil) { () throws(ConfigurationError) in try resolveStore(file) },
            drainGrace: duration(file.delivery?.drainSeconds, "delivery.drainSeconds", 20, 0...600),
            dedupWindow: duration(file.delivery?.dedupWindowSeconds, "delivery.dedupWindowSeconds", 600, 0...86_400),
            dedupMaxEvents: problems.check(1_000) { () throws(ConfigurationError) in try dedupMaxEvents(file.delivery) },
            logLevel: level,
            logFormat: format, logPings: file.log?.pings ?? false)
        settings.outboundCAFile = problems.check(nil) { () throws(ConfigurationError) in try resolveCAFile(file.fcm?.caFile) }
        settings.tracing = problems.check(nil) { () throws(ConfigurationError) in try resolveTracing(file.tracing) }
        return settings
    }

    /// `fcm.caFile`: a readable PEM bundle of certificates.
    private func resolveCAFile(_ path: String?) throws(ConfigurationError) -> String? {
        guard let path else { return nil }
        guard BoundedFile.text(path)?.contains("-----BEGIN CERTIFICATE-----") == true else {
            throw ConfigurationError(
                key: "fcm.caFile", problem: "\(path) cannot be read as PEM certificates",
                fix: "point it at the CA bundle your egress proxy re-signs TLS with (PEM, -----BEGIN CERTIFICATE-----)")
        }
        return path
    }

    /// One project from `fcm`, or each of `projects` with its own credentials and routes (the top-level ones by default).
    private func resolveProjects(
        _ file: ConfigurationFile, credentials: RelaySettings.Credentials, routes: RouteTable, _ problems: ConfigurationProblems
    ) -> [RelaySettings.ProjectSettings] {
        guard let entries = file.projects else {
            var id = file.fcm?.project
            if id == nil, case .keyFile(_, let key) = credentials { id = key.projectID }
            if let id { problems.check(()) { () throws(ConfigurationError) in try checkProjectID(id, key: "fcm.project") } }
            return [.init(id: id, credentials: credentials, routes: routes)]
        }
        guard !entries.isEmpty else {
            problems.note(
                ConfigurationError(
                    key: "projects", problem: "the list is empty", fix: "list each Firebase project, or remove the key and use fcm.project"))
            return [.init(id: nil, credentials: credentials, routes: routes)]
        }
        if file.fcm?.project != nil {
            problems.note(
                ConfigurationError(
                    key: "fcm.project", problem: "it is set together with projects", fix: "give each project's id in projects[].id instead"))
        }
        var projects: [RelaySettings.ProjectSettings] = []
        for (index, entry) in entries.enumerated() {
            let id = problems.check(nil) { () throws(ConfigurationError) -> String? in
                guard let id = entry.id else {
                    throw ConfigurationError(key: "projects[\(index)].id", problem: "it is required", fix: "set the Firebase project id")
                }
                try checkProjectID(id, key: "projects[\(index)].id")
                guard !projects.contains(where: { $0.id == id }) else {
                    throw ConfigurationError(key: "projects[\(index)].id", problem: "'\(id)' is listed twice", fix: "list each project once")
                }
                return id
            }
            let own = problems.check(credentials) { () throws(ConfigurationError) in
                guard let path = entry.credentialsFile else { return credentials }
                do {
                    return .keyFile(path: path, key: try ServiceAccountKey(contentsOf: path))
                } catch {
                    throw ConfigurationError(
                        key: "projects[\(index)].credentialsFile", problem: "\(error)", fix: "download this project's key in the Firebase console")
                }
            }
            let table = entry.routes.map { resolveRoutes($0, key: "projects[\(index)].routes", problems) } ?? routes
            if let id { projects.append(.init(id: id, credentials: own, routes: table)) }
        }
        return projects.isEmpty ? [.init(id: nil, credentials: credentials, routes: routes)] : projects
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

    private func resolveSecrets(_ sources: [SecretSource], _ problems: ConfigurationProblems) -> [WebhookSecret] {
        guard !sources.isEmpty else {
            problems.note(
                ConfigurationError(
                    key: "webhook.secrets", problem: "no webhook secret is configured, so no request could be verified",
                    fix: "add one, e.g. - env: RC_RELAY_WEBHOOK_SECRET (generate with: echo whsec_$(head -c32 /dev/urandom | base64))"))
            return []
        }
        return sources.enumerated().compactMap { index, source in
            problems.check(nil) { () throws(ConfigurationError) -> WebhookSecret? in
                let key = "webhook.secrets[\(index)]"
                let text = try read(source, key: key)
                do {
                    return try WebhookSecret(text)
                } catch {
                    throw ConfigurationError(
                        key: key, problem: "the secret is not whsec_ followed by base64 of 16 or more bytes",
                        fix: "copy the whole secret, whsec_ prefix included")
                }
            }
        }
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
