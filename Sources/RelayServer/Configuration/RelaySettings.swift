import FCMClient
import Foundation
import Logging
import RelayCore

/// The checked, resolved configuration the service runs with. Secrets inside it print as `<redacted>`.
public struct RelaySettings: Sendable {
    public var host: String
    public var port: Int
    public var webhookPath: String
    public var maxBodyBytes: Int
    public var verifier: StandardWebhookVerifier
    public var project: String
    public var credentialsFile: String
    public var serviceAccount: ServiceAccountKey
    public var fcmBaseURL: String
    public var validateOnly: Bool
    public var fcmTimeout: Duration
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    /// Log each ping's full FCM message at info (the development profile turns this on).
    public var logPings: Bool
    public var routes: RouteTable

    public enum LogFormat: String, Sendable, CaseIterable {
        case text, json
    }

    static let defaultHost = "127.0.0.1"
    static let defaultPort = 8080
    static let defaultWebhookPath = "/webhooks/remote-config"
    static let defaultMaxBodyBytes = 65_536
    static let defaultFCMBaseURL = "https://fcm.googleapis.com"
}
