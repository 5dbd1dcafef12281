import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// The first to hear a stop signal: readiness turns false and new webhooks get 503 at once; after
/// `server.shutdownDelaySeconds` (time for a load balancer to notice) the listeners close and deliveries drain.
struct DrainGate: Service {
    let drain: DrainState
    let metrics: RelayMetrics
    let delay: Duration
    let logger: Logger
    /// Waits out the delay (a test's own clock, in tests).
    let sleep: @Sendable (Duration) async -> Void

    func run() async throws {
        try? await gracefulShutdown()
        drain.start()
        metrics.ready.record(0)
        logger.notice("stopping: readiness is now false", metadata: ["listeners_close_in": "\(delay)"])
        if delay > .zero { await sleep(delay) }
    }
}

/// SIGHUP reloads the configuration file, as `POST /admin/reload` does.
struct ReloadOnHangup: Service {
    let reloader: Reloader
    let logger: Logger

    func run() async throws {
        for await _ in await UnixSignalsSequence(trapping: .sighup).cancelOnGracefulShutdown() {
            switch await reloader.reload() {
            case .success(let result):
                logger.notice("configuration reloaded on SIGHUP", metadata: ["restart_required": "\(result.restartRequired.joined(separator: ","))"])
            case .failure(let error):
                logger.error("configuration reload on SIGHUP refused; the running configuration stays", metadata: ["error": "\(error)"])
            }
        }
    }
}
