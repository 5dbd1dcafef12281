import DeliveryEngine
import FCMClient
import Foundation
import Logging
import RelayCore
import RelayStore

/// The checked, resolved configuration the service runs with. Secrets inside it print as `<redacted>`.
public struct RelaySettings: Sendable {
    public var host: String
    public var port: Int
    public var maxBodyBytes: Int
    /// Peers whose `X-Forwarded-For` is believed (the reverse proxy); nobody's by default.
    public var trustedProxies: TrustedProxies
    /// On SIGTERM, how long readiness reports false (and new webhooks get 503) before the listener closes.
    public var shutdownDelay: Duration
    /// A connection with no request part read (headers included) for this long is closed.
    public var idleTimeout: Duration
    /// A request's head and body must be read within this long of its head arriving, or the connection is closed.
    public var requestReadTimeout: Duration
    /// How long a readiness result (a failure too) is reused, so unauthenticated probes cost no token exchanges.
    public var readinessCache: Duration
    /// Bearer tokens for `/admin/`; empty: the admin API does not exist.
    public var adminTokens: [String]
    /// A separate listener for `/admin/` and `/metrics` (`adminPort` nil: the main listener serves them).
    public var adminHost: String
    public var adminPort: Int?
    /// How many recent pings the admin API lists.
    public var historySize: Int
    /// Readiness turns false when more pings than this wait for FCM.
    public var maxQueuedPings: Int
    /// How webhook senders prove who they are.
    public var webhookAuth: WebhookAuth
    /// Standard Webhooks secrets; empty when `webhookAuth` is `.oidc`.
    public var verifier: StandardWebhookVerifier
    /// Google-signed ID tokens; nil when `webhookAuth` is `.hmac`.
    public var oidc: OIDCSettings?
    /// The Firebase projects served, each with its credentials and routes; the first takes events that name none.
    public var projects: [ProjectSettings]
    public var fcmBaseURL: String
    public var validateOnly: Bool
    public var fcmTimeout: Duration
    /// PEM certificates trusted beside the system's for every request to Google (FCM, OAuth, the metadata server,
    /// JWKS, Remote Config): a corporate egress proxy that re-signs TLS, or a test's CA. Nil: the system's only.
    public var outboundCAFile: String? = nil
    /// Where spans go (`tracing.otlpEndpoint`): OTLP over HTTP/protobuf; nil: no tracing.
    public var tracing: TracingSettings? = nil
    /// Remote Config's REST API: catch-up polling lists its versions.
    public var remoteConfigBaseURL: String
    public var remoteConfigTimeout: Duration
    /// Catch-up polling; nil: off.
    public var poll: PollSettings?
    /// How failed sends are retried.
    public var retryPolicy: RetryPolicy
    /// At most this many FCM requests at once.
    public var outboundConcurrency: Int
    /// FCM requests a second per project, on average (`delivery.messagesPerSecond`).
    public var messagesPerSecond: Double
    /// How long the webhook waits for its pings to settle before answering 202 (spooled) or 503.
    public var answerWithin: Duration
    /// Where acknowledged events wait until delivered; nil: no spool (503 instead of 202).
    public var spoolDirectory: String?
    /// Shared state on PostgreSQL for several replicas (`store.postgres`); nil: this process keeps its own.
    package var store: StoreSettings?
    /// On SIGTERM, how long deliveries under way may take before they are spooled.
    public var drainGrace: Duration
    /// How long, and for how many events at most, settled deliveries are remembered against duplicates.
    public var dedupWindow: Duration
    public var dedupMaxEvents: Int
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    /// Log each ping's full FCM message at info (the development profile turns this on).
    public var logPings: Bool
    /// The ingest paths, fixed by `openapi.yaml`.
    public static let webhookPath = "/webhooks/remote-config"
    public static let pubsubPath = "/pubsub/remote-config"

    public enum WebhookAuth: String, Sendable, CaseIterable {
        /// Standard Webhooks HMAC signatures (scripts, CI, a forwarding function).
        case hmac
        /// A Google-signed OIDC ID token (Eventarc, Pub/Sub push).
        case oidc
        /// Both, each checked.
        case both
        /// Either: a request passes when it proves itself by one of the two (Eventarc and a CI job at once).
        case any
        /// No webhook at all: poll-only mode (`/webhooks/remote-config` does not exist).
        case none

        /// Whether webhook secrets must be configured.
        var needsHMAC: Bool { self == .hmac || self == .both || self == .any }
        /// Whether ID-token checks must be configured.
        var needsOIDC: Bool { self == .oidc || self == .both || self == .any }
    }

    /// How often Remote Config's version list is read, and how long a webhook has to announce a version first.
    public struct PollSettings: Sendable {
        public var interval: Duration
        public var grace: Duration
    }

    /// Where ID-token keys come from and what the token must say.
    public struct OIDCSettings: Sendable {
        public enum Keys: Sendable {
            case url(String)
            case json(String)
        }
        public var keys: Keys
        public var audiences: Set<String>
        public var allowedEmails: Set<String>
        public var clockSkew: Duration
        public var jwksMinimumRefresh: Duration
    }

    /// One Firebase project: who rc-relay sends as, and what it sends.
    public struct ProjectSettings: Sendable {
        /// The project id; nil means "ask the metadata server" (on Google Cloud with no key file).
        public var id: String?
        public var credentials: Credentials
        public var routes: RouteTable
    }

    /// Where FCM access tokens come from, in Application Default Credentials order.
    public enum Credentials: Sendable {
        /// A service-account key file (`fcm.credentialsFile`, else `GOOGLE_APPLICATION_CREDENTIALS`).
        case keyFile(path: String, key: ServiceAccountKey)
        /// The metadata server of Cloud Run, GKE or GCE (no key file anywhere).
        case metadataServer(baseURL: String)
    }

    /// Traces over OTLP/HTTP (protobuf) to a collector.
    public struct TracingSettings: Sendable, Equatable {
        /// The full URL spans are posted to: the collector's base URL with the OTLP path, `/v1/traces`.
        public var tracesURL: String
    }

    public enum LogFormat: String, Sendable, CaseIterable {
        case text, json
    }

    static let defaultHost = "127.0.0.1"
    static let defaultPort = 8080
    static let defaultWebhookPath = "/webhooks/remote-config"
    static let defaultPubSubPath = "/pubsub/remote-config"
    static let defaultMaxBodyBytes = 65_536
    static let defaultFCMBaseURL = "https://fcm.googleapis.com"
    static let defaultRemoteConfigBaseURL = "https://firebaseremoteconfig.googleapis.com"
    static let googleJWKSURL = "https://www.googleapis.com/oauth2/v3/certs"
}
