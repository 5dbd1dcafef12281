import Configuration
import Foundation

/// The settings that command-line flags and environment variables may give, over the file. Their names follow one
/// rule, swift-configuration's: `RC_RELAY_` and the key in upper snake case, without `server.` (`delivery.spoolDirectory`
/// is `RC_RELAY_DELIVERY_SPOOL_DIRECTORY`, `server.port` is `RC_RELAY_PORT`); a flag is the same in lower case with
/// dashes (`--delivery-spool-directory`, `--port`). The table in docs/configuration.md is checked against this list.
public enum EnvironmentOverrides {
    /// A setting that a variable or a flag may give.
    public struct Override: Sendable {
        public let key: String
        /// Lists take space-separated values (or a flag's several values); `routes`, a YAML/JSON flow list.
        public let isList: Bool
        /// Never shown in an access log or an error.
        public let isSecret: Bool
        /// The environment variable, as swift-configuration encodes ``EnvironmentOverrides/variableKey(_:)``.
        public let variable: String
        /// The command-line flag, without `--`: the variable's name without `RC_RELAY_`, in lower case with dashes.
        public let flag: String

        /// The names are worked out once: every load looks each one up, and working them out per lookup was a sixth
        /// of `check-config`'s time (measured by profiling the configuration fuzz target).
        init(key: String, isList: Bool = false, isSecret: Bool = false) {
            (self.key, self.isList, self.isSecret) = (key, isList, isSecret)
            let words = EnvironmentOverrides.variableKey(key).dropFirst(2).map(Self.snake)
            variable = "RC_RELAY_" + words.joined(separator: "_")
            flag = words.map { $0.lowercased().replacingOccurrences(of: "_", with: "-") }.joined(separator: "-")
        }

        /// `maxBodyBytes` → `MAX_BODY_BYTES`, `metadataURL` → `METADATA_URL`: a break before each upper-case letter
        /// that follows a lower-case one.
        private static func snake(_ word: String) -> String {
            var result = ""
            var previous: Character?
            for character in word {
                if let previous, previous.isLowercase, character.isUppercase { result += "_" }
                result.append(character)
                previous = character
            }
            return result.uppercased()
        }
    }

    /// The file to read; no file and no `--config` selects the development profile.
    public static let configPath = "RC_RELAY_CONFIG"

    /// A key as the environment provider looks it up: `rc.relay` first, and the `server` section left out.
    @Sendable static func variableKey(_ key: AbsoluteConfigKey) -> AbsoluteConfigKey {
        AbsoluteConfigKey(["rc", "relay"] + flagKey(key).components, context: key.context)
    }

    /// A key as the command-line provider looks it up: the `server` section left out.
    @Sendable static func flagKey(_ key: AbsoluteConfigKey) -> AbsoluteConfigKey {
        var components = key.components
        if components.first == "server" { components.removeFirst() }
        return AbsoluteConfigKey(components, context: key.context)
    }

    static func variableKey(_ key: String) -> [String] {
        variableKey(AbsoluteConfigKey(key.split(separator: ".").map(String.init))).components
    }

    public static let all: [Override] = [
        .init(key: "server.host"),
        .init(key: "server.port"),
        .init(key: "server.maxBodyBytes"),
        .init(key: "server.trustedProxies", isList: true),
        .init(key: "server.shutdownDelaySeconds"),
        .init(key: "server.idleTimeoutSeconds"),
        .init(key: "server.requestReadTimeoutSeconds"),
        .init(key: "server.readinessCacheSeconds"),
        .init(key: "webhook.auth"),
        .init(key: "webhook.secrets", isList: true, isSecret: true),
        .init(key: "webhook.toleranceSeconds"),
        .init(key: "fcm.project"),
        .init(key: "fcm.credentialsFile"),
        .init(key: "fcm.metadataURL"),
        .init(key: "fcm.baseURL"),
        .init(key: "fcm.validateOnly"),
        .init(key: "fcm.timeoutSeconds"),
        .init(key: "fcm.caFile"),
        .init(key: "remoteConfig.baseURL"),
        .init(key: "remoteConfig.timeoutSeconds"),
        .init(key: "poll.intervalSeconds"),
        .init(key: "poll.graceSeconds"),
        .init(key: "oidc.audiences", isList: true),
        .init(key: "oidc.allowedEmails", isList: true),
        .init(key: "oidc.jwksURL"),
        .init(key: "oidc.jwksFile"),
        .init(key: "oidc.clockSkewSeconds"),
        .init(key: "oidc.jwksMinRefreshSeconds"),
        .init(key: "delivery.maxAttempts"),
        .init(key: "delivery.deadlineSeconds"),
        .init(key: "delivery.baseDelaySeconds"),
        .init(key: "delivery.maxDelaySeconds"),
        .init(key: "delivery.quotaDelaySeconds"),
        .init(key: "delivery.concurrency"),
        .init(key: "delivery.messagesPerSecond"),
        .init(key: "delivery.answerWithinSeconds"),
        .init(key: "delivery.spoolDirectory"),
        .init(key: "delivery.drainSeconds"),
        .init(key: "delivery.dedupWindowSeconds"),
        .init(key: "delivery.dedupMaxEvents"),
        .init(key: "delivery.historySize"),
        .init(key: "delivery.maxQueuedPings"),
        .init(key: "store.postgres.url", isSecret: true),
        .init(key: "store.postgres.password", isSecret: true),
        .init(key: "store.postgres.caFile"),
        .init(key: "store.postgres.leaseSeconds"),
        .init(key: "admin.tokens", isList: true, isSecret: true),
        .init(key: "admin.host"),
        .init(key: "admin.port"),
        .init(key: "log.level"),
        .init(key: "log.format"),
        .init(key: "log.pings"),
        .init(key: "tracing.otlpEndpoint"),
        .init(key: "routes", isList: true),
    ]
}
