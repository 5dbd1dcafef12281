import AsyncHTTPClient
import DeliveryEngine
import FCMClient
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import OpenAPIHummingbird
import RelayCore
import ServiceLifecycle

/// Each project's credentials, token cache, sender and Remote Config client; and the ID-token verifier.
extension RelayApplication {
    /// Each project's routes and sender; projects with the same credentials share one token cache.
    static func makeProjects(
        _ settings: RelaySettings, httpClient: HTTPClient, targetClients: HTTPTargetClients, metrics: RelayMetrics, logger: Logger
    ) async throws -> ProjectDirectory {
        var sources: [String: CachingTokenSource] = [:]
        var pipelines: [(String, ProjectDirectory.Pipeline)] = []
        for project in settings.projects {
            let (identity, source, metadata) = try await tokenSource(
                project.credentials, cached: sources, httpClient: httpClient, settings: settings, metrics: metrics, logger: logger)
            sources[identity] = source
            let id: String
            if let known = project.id {
                id = known
            } else {
                guard let metadata else {
                    throw ConfigurationError(
                        key: "fcm.project", problem: "the key file names no project_id", fix: "set fcm.project to the Firebase project id")
                }
                // Off Google Cloud the name does not resolve, and the answer can take the resolver's whole timeout: say
                // what the relay waits for.
                logger.notice("asking the metadata server for the project id (fcm.project is not set)", metadata: ["url": "\(identity)"])
                do {
                    id = try await projectID(from: metadata)
                } catch {
                    throw ConfigurationError(
                        key: "fcm.project", problem: "it is not set, and the metadata server did not say (\(error))",
                        fix: "set fcm.project, or fcm.credentialsFile to a service-account key file when not on Google Cloud")
                }
            }
            let sender = FCMSender(httpClient: httpClient, baseURL: settings.fcmBaseURL, tokenSource: source, timeout: settings.fcmTimeout)
            var send = SendPlan(
                sender: FCMMessageSender(sender: sender), policy: settings.retryPolicy, validateOnly: settings.validateOnly,
                logPings: settings.logPings)
            // Each route's other target its own sender, with its URL, secrets and client (a new one per reload: an HTTP
            // target's 410 disables it until then).
            for route in project.routes.routes {
                guard let target = route.destination,
                    let sender = TargetKinds.kind(target.kind)?.sender(route: route.name, target: target, clients: targetClients, logger: logger)
                else { continue }
                send.senders[PingPayload.sender(route: route.name)] = sender
            }
            let credentials: (String, String) =
                switch project.credentials {
                case .keyFile(let path, _): ("keyFile", path)
                case .metadataServer(let baseURL): ("metadataServer", baseURL)
                }
            let remoteConfig = RemoteConfigClient(
                httpClient: httpClient, baseURL: settings.remoteConfigBaseURL, tokenSource: source, timeout: settings.remoteConfigTimeout)
            pipelines.append(
                (id, .init(routes: project.routes, send: send, tokenSource: source, credentials: credentials, remoteConfig: remoteConfig)))
        }
        return ProjectDirectory(pipelines)
    }

    /// The metadata server's project id, tried a few times: it can be slow to answer while an instance starts.
    static func projectID(from metadata: MetadataServerExchange) async throws(TokenError) -> String {
        var attempt = 1
        while true {
            do {
                return try await metadata.projectID()
            } catch {
                guard attempt < 3 else { throw error }
                attempt += 1
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    /// The cached token source for one set of credentials: its identity, the source, and the metadata exchange if any.
    static func tokenSource(
        _ credentials: RelaySettings.Credentials, cached: [String: CachingTokenSource], httpClient: HTTPClient,
        settings: RelaySettings, metrics: RelayMetrics, logger: Logger
    ) async throws -> (String, CachingTokenSource, MetadataServerExchange?) {
        let onExchange: @Sendable (Bool) -> Void = { metrics.tokenRefresh(succeeded: $0) }
        switch credentials {
        case .keyFile(let path, let key):
            if let source = cached[path] { return (path, source, nil) }
            do {
                return (
                    path,
                    try await ServiceAccountTokenSource.make(key: key, path: path, httpClient: httpClient, logger: logger, onExchange: onExchange),
                    nil
                )
            } catch {
                throw ConfigurationError(key: "fcm.credentialsFile", problem: "\(error)", fix: "download a new key in the Firebase console")
            }
        case .metadataServer(let baseURL):
            let metadata = MetadataServerExchange(baseURL: baseURL, httpClient: httpClient, timeout: settings.fcmTimeout)
            return (baseURL, cached[baseURL] ?? CachingTokenSource(exchange: metadata, onExchange: onExchange), metadata)
        }
    }

    /// The ID-token verifier when `oidc` is configured, with its keys from a URL or a file.
    static func makeIDTokenVerifier(_ oidc: RelaySettings.OIDCSettings?, httpClient: HTTPClient) async throws -> IDTokenVerifier? {
        guard let oidc else { return nil }
        let keys: any JWKSProvider
        switch oidc.keys {
        case .url(let url):
            keys = RemoteJWKS(url: url, httpClient: httpClient, minimumRefreshInterval: oidc.jwksMinimumRefresh)
        case .json(let json):
            do {
                keys = try await FileJWKS(json: json)
            } catch {
                throw ConfigurationError(
                    key: "oidc.jwksFile", problem: "the file is not a JWKS (JSON Web Key Set)",
                    fix: "save Google's keys from \(RelaySettings.googleJWKSURL)")
            }
        }
        return IDTokenVerifier(
            keys: keys, audiences: oidc.audiences, allowedEmails: oidc.allowedEmails,
            clockSkew: Double(oidc.clockSkew.components.seconds))
    }
}
