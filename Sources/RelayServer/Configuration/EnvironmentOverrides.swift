/// Environment variables that override the file, one per setting. The table in docs/configuration.md is checked against this list.
public enum EnvironmentOverrides {
    /// An environment variable and the configuration key it sets.
    public struct Override: Sendable {
        public var variable: String
        public var key: String
        /// Lists take space-separated values, or a YAML/JSON flow value (`[a, b]`) for routes.
        public var isList: Bool
    }

    /// The file to read; no file and no `--config` selects the development profile.
    public static let configPath = "RC_RELAY_CONFIG"

    public static let all: [Override] = [
        .init(variable: "RC_RELAY_HOST", key: "server.host", isList: false),
        .init(variable: "RC_RELAY_PORT", key: "server.port", isList: false),
        .init(variable: "RC_RELAY_MAX_BODY_BYTES", key: "server.maxBodyBytes", isList: false),
        .init(variable: "RC_RELAY_TRUSTED_PROXIES", key: "server.trustedProxies", isList: true),
        .init(variable: "RC_RELAY_SHUTDOWN_DELAY_SECONDS", key: "server.shutdownDelaySeconds", isList: false),
        .init(variable: "RC_RELAY_IDLE_TIMEOUT_SECONDS", key: "server.idleTimeoutSeconds", isList: false),
        .init(variable: "RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS", key: "server.requestReadTimeoutSeconds", isList: false),
        .init(variable: "RC_RELAY_READINESS_CACHE_SECONDS", key: "server.readinessCacheSeconds", isList: false),
        .init(variable: "RC_RELAY_WEBHOOK_AUTH", key: "webhook.auth", isList: false),
        .init(variable: "RC_RELAY_WEBHOOK_SECRETS", key: "webhook.secrets", isList: true),
        .init(variable: "RC_RELAY_WEBHOOK_TOLERANCE_SECONDS", key: "webhook.toleranceSeconds", isList: false),
        .init(variable: "RC_RELAY_FCM_PROJECT", key: "fcm.project", isList: false),
        .init(variable: "RC_RELAY_FCM_CREDENTIALS_FILE", key: "fcm.credentialsFile", isList: false),
        .init(variable: "RC_RELAY_FCM_METADATA_URL", key: "fcm.metadataURL", isList: false),
        .init(variable: "RC_RELAY_FCM_BASE_URL", key: "fcm.baseURL", isList: false),
        .init(variable: "RC_RELAY_FCM_VALIDATE_ONLY", key: "fcm.validateOnly", isList: false),
        .init(variable: "RC_RELAY_FCM_TIMEOUT_SECONDS", key: "fcm.timeoutSeconds", isList: false),
        .init(variable: "RC_RELAY_OIDC_AUDIENCES", key: "oidc.audiences", isList: true),
        .init(variable: "RC_RELAY_OIDC_ALLOWED_EMAILS", key: "oidc.allowedEmails", isList: true),
        .init(variable: "RC_RELAY_OIDC_JWKS_URL", key: "oidc.jwksURL", isList: false),
        .init(variable: "RC_RELAY_OIDC_JWKS_FILE", key: "oidc.jwksFile", isList: false),
        .init(variable: "RC_RELAY_OIDC_CLOCK_SKEW_SECONDS", key: "oidc.clockSkewSeconds", isList: false),
        .init(variable: "RC_RELAY_OIDC_JWKS_MIN_REFRESH_SECONDS", key: "oidc.jwksMinRefreshSeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_MAX_ATTEMPTS", key: "delivery.maxAttempts", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_DEADLINE_SECONDS", key: "delivery.deadlineSeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_BASE_DELAY_SECONDS", key: "delivery.baseDelaySeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_MAX_DELAY_SECONDS", key: "delivery.maxDelaySeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_QUOTA_DELAY_SECONDS", key: "delivery.quotaDelaySeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_CONCURRENCY", key: "delivery.concurrency", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS", key: "delivery.answerWithinSeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_SPOOL_DIRECTORY", key: "delivery.spoolDirectory", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_DRAIN_SECONDS", key: "delivery.drainSeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_DEDUP_WINDOW_SECONDS", key: "delivery.dedupWindowSeconds", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_DEDUP_MAX_EVENTS", key: "delivery.dedupMaxEvents", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_HISTORY_SIZE", key: "delivery.historySize", isList: false),
        .init(variable: "RC_RELAY_DELIVERY_MAX_QUEUED_PINGS", key: "delivery.maxQueuedPings", isList: false),
        .init(variable: "RC_RELAY_ADMIN_TOKENS", key: "admin.tokens", isList: true),
        .init(variable: "RC_RELAY_ADMIN_HOST", key: "admin.host", isList: false),
        .init(variable: "RC_RELAY_ADMIN_PORT", key: "admin.port", isList: false),
        .init(variable: "RC_RELAY_LOG_LEVEL", key: "log.level", isList: false),
        .init(variable: "RC_RELAY_LOG_FORMAT", key: "log.format", isList: false),
        .init(variable: "RC_RELAY_LOG_PINGS", key: "log.pings", isList: false),
        .init(variable: "RC_RELAY_ROUTES", key: "routes", isList: true),
    ]
}
