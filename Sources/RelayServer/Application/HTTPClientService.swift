import AsyncHTTPClient
import ServiceLifecycle

/// Runs the one outbound `HTTPClient` as a service, so it shuts down with the service group.
struct HTTPClientService: Service {
    let client: HTTPClient

    func run() async throws {
        try? await gracefulShutdown()
        try await client.shutdown()
    }
}
