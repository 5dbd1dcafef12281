import AsyncHTTPClient
import FCMClient
import Foundation
import Hummingbird
import Logging
import RelayCore
import ServiceLifecycle

/// Builds the relay from its settings: the one place where the parts are wired together.
public enum RelayApplication {
    /// The service's name and version, as `/healthz` and logs report them.
    public static let version = "0.1.0"

    /// Builds the application. `onServerRunning` receives the bound port (useful with port 0).
    public static func build(
        settings: RelaySettings, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws -> some ApplicationProtocol {
        let httpClient = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: .init(
                timeout: .init(
                    connect: .seconds(min(5, settings.fcmTimeout.components.seconds)),
                    read: .seconds(settings.fcmTimeout.components.seconds)),
                // The pool's default of 8 HTTP/1 connections per host would silently cap `delivery.concurrency`.
                connectionPool: .init(
                    idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: settings.outboundConcurrency)))
        let deliveries: DeliveryService
        let idTokens: IDTokenVerifier?
        do {
            let projects = try await makeProjects(settings, httpClient: httpClient, logger: logger)
            deliveries = DeliveryService(
                projects: projects,
                recent: RecentEvents(
                    window: settings.dedupWindow, capacity: settings.dedupMaxEvents, spool: try makeSpool(settings.spoolDirectory)),
                answerWithin: settings.answerWithin)
            idTokens = try await makeIDTokenVerifier(settings.oidc, httpClient: httpClient)
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
        return Application(
            router: makeRouter(settings: settings, deliveries: deliveries, idTokens: idTokens),
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "rc-relay"),
            // Shut down in reverse: deliveries drain while the HTTP client is still up.
            services: [HTTPClientService(client: httpClient), DeliveryLifecycle(service: deliveries, grace: settings.drainGrace, logger: logger)],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? settings.port) },
            logger: logger)
    }

    static func makeSpool(_ directory: String?) throws -> (any Spool)? {
        guard let directory else { return nil }
        do {
            return try FileSpool(directory: directory)
        } catch {
            throw ConfigurationError(key: "delivery.spoolDirectory", problem: "\(directory) cannot be created", fix: "point it at a writable directory on a persistent volume")
        }
    }

    /// Each project's routes and dispatcher; projects with the same credentials share one token cache.
    static func makeProjects(_ settings: RelaySettings, httpClient: HTTPClient, logger: Logger) async throws -> ProjectDirectory {
        var sources: [String: CachingTokenSource] = [:]
        let limit = OutboundLimit(limit: settings.outboundConcurrency)
        let latest = LatestVersions()
        var pipelines: [(String, ProjectDirectory.Pipeline)] = []
        for project in settings.projects {
            let (identity, source, metadata) = try await tokenSource(project.credentials, cached: sources, httpClient: httpClient, settings: settings, logger: logger)
            sources[identity] = source
            let id: String
            if let known = project.id {
                id = known
            } else {
                guard let metadata else {
                    throw ConfigurationError(key: "fcm.project", problem: "the key file names no project_id", fix: "set fcm.project to the Firebase project id")
                }
                do {
                    id = try await projectID(from: metadata)
                } catch {
                    throw ConfigurationError(
                        key: "fcm.project", problem: "it is not set, and the metadata server did not say (\(error))",
                        fix: "set fcm.project, or fcm.credentialsFile to a service-account key file when not on Google Cloud")
                }
            }
            let sender = FCMSender(httpClient: httpClient, baseURL: settings.fcmBaseURL, tokenSource: source, timeout: settings.fcmTimeout)
            let dispatcher = Dispatcher(
                sender: sender, validateOnly: settings.validateOnly, logPings: settings.logPings, policy: settings.retryPolicy,
                limit: limit, latest: latest)
            pipelines.append((id, .init(routes: project.routes, dispatcher: dispatcher)))
        }
        return ProjectDirectory(pipelines)
    }

    /// The metadata server's project id, tried a few times: it can be slow to answer while an instance starts.
    private static func projectID(from metadata: MetadataServerExchange) async throws(TokenError) -> String {
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
    private static func tokenSource(
        _ credentials: RelaySettings.Credentials, cached: [String: CachingTokenSource], httpClient: HTTPClient,
        settings: RelaySettings, logger: Logger
    ) async throws -> (String, CachingTokenSource, MetadataServerExchange?) {
        switch credentials {
        case .keyFile(let path, let key):
            if let source = cached[path] { return (path, source, nil) }
            do {
                return (path, try await ServiceAccountTokenSource.make(key: key, path: path, httpClient: httpClient, logger: logger), nil)
            } catch {
                throw ConfigurationError(key: "fcm.credentialsFile", problem: "\(error)", fix: "download a new key in the Firebase console")
            }
        case .metadataServer(let baseURL):
            let metadata = MetadataServerExchange(baseURL: baseURL, httpClient: httpClient, timeout: settings.fcmTimeout)
            return (baseURL, cached[baseURL] ?? CachingTokenSource(exchange: metadata), metadata)
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
                throw ConfigurationError(key: "oidc.jwksFile", problem: "the file is not a JWKS (JSON Web Key Set)", fix: "save Google's keys from \(RelaySettings.googleJWKSURL)")
            }
        }
        return IDTokenVerifier(
            keys: keys, audiences: oidc.audiences, allowedEmails: oidc.allowedEmails,
            clockSkew: Double(oidc.clockSkew.components.seconds))
    }

    /// The routes: the webhook, Pub/Sub push (with `oidc`), and the health probe.
    static func makeRouter(settings: RelaySettings, deliveries: DeliveryService, idTokens: IDTokenVerifier?) -> Router<RelayRequestContext> {
        let webhook = WebhookController(
            ingest: .webhook, auth: settings.webhookAuth, verifier: settings.verifier,
            idTokens: settings.webhookAuth.needsOIDC ? idTokens : nil, maxBodyBytes: settings.maxBodyBytes,
            deliveries: deliveries)
        let router = Router(context: RelayRequestContext.self)
        router.post(RouterPath(settings.webhookPath)) { request, context in
            await webhook.handle(request, context: context)
        }
        if let idTokens {
            // Pub/Sub push proves itself with an ID token only; without `oidc` settings the path does not exist.
            let pubSub = WebhookController(
                ingest: .pubSub, auth: .oidc, verifier: settings.verifier, idTokens: idTokens,
                maxBodyBytes: settings.maxBodyBytes, deliveries: deliveries)
            router.post(RouterPath(settings.pubsubPath)) { request, context in
                await pubSub.handle(request, context: context)
            }
        }
        router.get("/healthz") { _, _ in
            JSONResponse.make(["status": "ok", "version": version])
        }
        return router
    }
}
