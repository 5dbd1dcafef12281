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
            configuration: .init(timeout: .init(connect: .seconds(5), read: .seconds(settings.fcmTimeout.components.seconds))))
        let tokenSource: CachingTokenSource
        let project: String
        do {
            (tokenSource, project) = try await credentials(settings, httpClient: httpClient, logger: logger)
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
        let sender = FCMSender(
            httpClient: httpClient, baseURL: settings.fcmBaseURL, tokenSource: tokenSource, timeout: settings.fcmTimeout)
        let idTokens: IDTokenVerifier?
        do {
            idTokens = try await makeIDTokenVerifier(settings.oidc, httpClient: httpClient)
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
        let router = makeRouter(settings: settings, project: project, sender: sender, idTokens: idTokens)
        return Application(
            router: router,
            configuration: .init(address: .hostname(settings.host, port: settings.port), serverName: "rc-relay"),
            services: [HTTPClientService(client: httpClient)],
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? settings.port) },
            logger: logger)
    }

    /// The token source for the configured credentials, and the project (asked of the metadata server if unset).
    static func credentials(_ settings: RelaySettings, httpClient: HTTPClient, logger: Logger) async throws -> (CachingTokenSource, String) {
        switch settings.credentials {
        case .keyFile(let path, let key):
            let source: CachingTokenSource
            do {
                source = try await ServiceAccountTokenSource.make(key: key, path: path, httpClient: httpClient, logger: logger)
            } catch {
                throw ConfigurationError(key: "fcm.credentialsFile", problem: "\(error)", fix: "download a new key in the Firebase console")
            }
            guard let project = settings.project else {
                throw ConfigurationError(key: "fcm.project", problem: "no Firebase project is known", fix: "set fcm.project to the Firebase project id")
            }
            return (source, project)
        case .metadataServer(let baseURL):
            let metadata = MetadataServerExchange(baseURL: baseURL, httpClient: httpClient, timeout: settings.fcmTimeout)
            if let project = settings.project { return (CachingTokenSource(exchange: metadata), project) }
            do {
                return (CachingTokenSource(exchange: metadata), try await metadata.projectID())
            } catch {
                throw ConfigurationError(
                    key: "fcm.project", problem: "it is not set, and the metadata server at \(baseURL) did not say (\(error))",
                    fix: "set fcm.project, or fcm.credentialsFile to a service-account key file when not on Google Cloud")
            }
        }
    }

    /// The ID-token verifier for `webhook.auth: oidc` or `both`, with its keys from a URL or a file.
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

    /// The routes: the webhook and the health probe.
    static func makeRouter(
        settings: RelaySettings, project: String, sender: any MessageSender, idTokens: IDTokenVerifier?
    ) -> Router<RelayRequestContext> {
        let dispatcher = Dispatcher(sender: sender, validateOnly: settings.validateOnly, logPings: settings.logPings)
        let recent = RecentEvents()
        let webhook = WebhookController(
            ingest: .webhook, auth: settings.webhookAuth, verifier: settings.verifier,
            idTokens: settings.webhookAuth.needsOIDC ? idTokens : nil, maxBodyBytes: settings.maxBodyBytes,
            project: project, routes: settings.routes, dispatcher: dispatcher, recent: recent)
        let router = Router(context: RelayRequestContext.self)
        router.post(RouterPath(settings.webhookPath)) { request, context in
            await webhook.handle(request, context: context)
        }
        if let idTokens {
            // Pub/Sub push proves itself with an ID token only; without `oidc` settings the path does not exist.
            let pubSub = WebhookController(
                ingest: .pubSub, auth: .oidc, verifier: settings.verifier, idTokens: idTokens,
                maxBodyBytes: settings.maxBodyBytes, project: project, routes: settings.routes, dispatcher: dispatcher,
                recent: recent)
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
