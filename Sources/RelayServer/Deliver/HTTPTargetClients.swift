import AsyncHTTPClient
import NIOConcurrencyHelpers
import NIOSSL
import ServiceLifecycle

/// The HTTP clients of HTTP targets, apart from Google's: one with the system's roots, and one per `caFile` (whose
/// certificates are trusted beside them). Kept across reloads, so a reload opens no client; shut down with the process,
/// after the engine (a ``Service`` placed like ``HTTPClientService``).
final class HTTPTargetClients: Service {
    private let clients = NIOLockedValueBox<[String: HTTPClient]>([:])

    /// The client that verifies a receiver's certificate against the system's roots and `caFile`'s.
    func client(caFile: String?) -> HTTPClient {
        clients.withLockedValue { clients in
            let key = caFile ?? ""
            if let client = clients[key] { return client }
            // Each request has the target's own deadline (`timeoutSeconds`, a minute at most); connecting takes 5 s at most.
            var configuration = HTTPClient.Configuration(
                timeout: .init(connect: .seconds(5), read: .seconds(60)), connectionPool: .init(idleTimeout: .seconds(60)))
            configuration.tracing.tracer = nil
            // A call goes to the configured URL only: a redirect is the receiver's answer (a `3xx`, refused for good),
            // never followed to a URL the configuration does not name, with the call's signed headers and body.
            configuration.redirectConfiguration = .disallow
            if let caFile {
                var tls = TLSConfiguration.makeClientConfiguration()
                tls.additionalTrustRoots = [.file(caFile)]
                configuration.tlsConfiguration = tls
            }
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            clients[key] = client
            return client
        }
    }

    func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }

    /// Shuts every client down (a start that failed, or the end of `run`).
    func shutdown() async {
        for client in clients.withLockedValue({ Array($0.values) }) { try? await client.shutdown() }
    }
}
