import RelayCore

/// The YAML configuration file, as written. ``ConfigurationLoader`` checks it and resolves it into ``RelaySettings``.
struct ConfigurationFile: Decodable {
    var server: Server?
    var webhook: Webhook?
    var fcm: FCM?
    var log: Log?
    var oidc: OIDC?
    var delivery: Delivery?
    var admin: Admin?
    var routes: [RouteDefinition]?
    var projects: [Project]?
    var remoteConfig: RemoteConfig?
    var poll: Poll?
    var store: Store?
    var tracing: Tracing?

    struct Tracing: Decodable {
        var otlpEndpoint: String?
    }

    /// Shared state for several replicas (docs/replicas.md).
    struct Store: Decodable {
        var postgres: Postgres?

        struct Postgres: Decodable {
            var url: String?
            var password: SecretSource?
            var caFile: String?
            var leaseSeconds: Double?
        }
    }

    /// Remote Config's REST API (catch-up polling reads it).
    struct RemoteConfig: Decodable {
        var baseURL: String?
        var timeoutSeconds: Int?
    }

    /// Catch-up polling of Remote Config's version list.
    struct Poll: Decodable {
        var intervalSeconds: Double?
        var graceSeconds: Double?
    }

    /// One of several Firebase projects served by one process.
    struct Project: Decodable {
        var id: String?
        var credentialsFile: String?
        var routes: [RouteDefinition]?
    }

    struct Server: Decodable {
        var host: String?
        var port: Int?
        var maxBodyBytes: Int?
        var trustedProxies: [String]?
        var shutdownDelaySeconds: Double?
        var idleTimeoutSeconds: Double?
        var requestReadTimeoutSeconds: Double?
        var readinessCacheSeconds: Double?
    }

    struct Admin: Decodable {
        var tokens: [SecretSource]?
        var host: String?
        var port: Int?
    }

    struct Webhook: Decodable {
        var auth: String?
        var secrets: [SecretSource]?
        var toleranceSeconds: Int?
    }

    struct FCM: Decodable {
        var project: String?
        var credentialsFile: String?
        var metadataURL: String?
        var baseURL: String?
        var validateOnly: Bool?
        var timeoutSeconds: Int?
        /// Extra CA certificates for every outbound HTTPS request.
        var caFile: String?
    }

    struct Delivery: Decodable {
        var maxAttempts: Int?
        var deadlineSeconds: Double?
        var baseDelaySeconds: Double?
        var maxDelaySeconds: Double?
        var quotaDelaySeconds: Double?
        var concurrency: Int?
        var messagesPerSecond: Double?
        var answerWithinSeconds: Double?
        var spoolDirectory: String?
        var drainSeconds: Double?
        var dedupWindowSeconds: Double?
        var dedupMaxEvents: Int?
        var historySize: Int?
        var maxQueuedPings: Int?
    }

    struct OIDC: Decodable {
        var audiences: [String]?
        var allowedEmails: [String]?
        var jwksURL: String?
        var jwksFile: String?
        var clockSkewSeconds: Int?
        var jwksMinRefreshSeconds: Int?
    }

    struct Log: Decodable {
        var level: String?
        var format: String?
        var pings: Bool?
    }

    /// Every key the file may hold, to refuse typos instead of ignoring them: a route's targets of other kinds take
    /// their kind's keys, and a project's routes the same keys as the top-level routes.
    static let knownKeys: [String: Set<String>] = {
        var keys = fileKeys
        for kind in TargetKinds.all {
            keys["routes[]", default: []].insert(kind.key)
            for (path, names) in kind.knownKeys { keys[path.isEmpty ? "routes[].\(kind.key)" : "routes[].\(kind.key).\(path)"] = names }
        }
        for (section, names) in keys where section.hasPrefix("routes[]") { keys["projects[]." + section] = names }
        return keys
    }()

    private static let fileKeys: [String: Set<String>] = [
        "": [
            "server", "webhook", "fcm", "log", "oidc", "delivery", "admin", "routes", "projects", "remoteConfig", "poll", "store",
            "tracing",
        ],
        "admin": ["tokens", "host", "port"],
        "admin.tokens[]": ["value", "env", "file"],
        "delivery": [
            "maxAttempts", "deadlineSeconds", "baseDelaySeconds", "maxDelaySeconds", "quotaDelaySeconds", "concurrency", "messagesPerSecond",
            "answerWithinSeconds", "spoolDirectory", "drainSeconds", "dedupWindowSeconds", "dedupMaxEvents", "historySize",
            "maxQueuedPings",
        ],
        "projects[]": ["id", "credentialsFile", "routes"],
        "remoteConfig": ["baseURL", "timeoutSeconds"],
        "store": ["postgres"],
        "store.postgres": ["url", "password", "caFile", "leaseSeconds"],
        "store.postgres.password": ["value", "env", "file"],
        "poll": ["intervalSeconds", "graceSeconds"],
        "tracing": ["otlpEndpoint"],
        "server": [
            "host", "port", "maxBodyBytes", "trustedProxies", "shutdownDelaySeconds", "idleTimeoutSeconds",
            "requestReadTimeoutSeconds", "readinessCacheSeconds",
        ],
        "webhook": ["auth", "secrets", "toleranceSeconds"],
        "oidc": ["audiences", "allowedEmails", "jwksURL", "jwksFile", "clockSkewSeconds", "jwksMinRefreshSeconds"],
        "fcm": ["project", "credentialsFile", "metadataURL", "baseURL", "validateOnly", "timeoutSeconds", "caFile"],
        "log": ["level", "format", "pings"],
        "routes[]": [
            "name", "topic", "condition", "data", "when", "audience", "android", "apns", "webpush", "debounceSeconds", "waves",
        ],
        "routes[].waves": ["shards", "spreadSeconds", "topic"],
        "routes[].when": ["updateTypes", "origins", "changed"],
        "routes[].when.changed": ["parameters", "conditions"],
        "routes[].android": ["priority", "collapseKey", "ttlSeconds"],
        "routes[].apns": ["collapseId"],
        "routes[].webpush": ["ttlSeconds", "urgency"],
        "webhook.secrets[]": ["value", "env", "file"],
    ]
}
