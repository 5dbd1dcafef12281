import AsyncHTTPClient
import FCMClient
import Foundation
import Logging

/// Everything built from the settings that a reload replaces at once: routes, credentials, verifiers, tokens.
/// Deliveries under way keep the configuration they started with.
struct RelayConfiguration: Sendable {
    let settings: RelaySettings
    let projects: ProjectDirectory
    let idTokens: IDTokenVerifier?
    let loadedAt: Date
}

/// What lives as long as the process, whatever the configuration: a reload builds on these.
struct RelayParts: Sendable {
    let httpClient: HTTPClient
    let limit: OutboundLimit
    let latest: LatestVersions
    let log: DeliveryLog
    let metrics: RelayMetrics
}

/// The running relay's state: the current configuration (swapped whole on reload), whether it is draining, and the
/// parts that live as long as the process.
final class RelayRuntime: Sendable {
    let parts: RelayParts
    let recent: RecentEvents
    let startedAt = Date()
    /// The configuration file, or `development profile`.
    let source: String
    /// Reads the file again; nil when there is no file to read.
    let reader: (@Sendable () throws -> RelaySettings)?
    private let current: Locked<RelayConfiguration>
    private let state = Locked((reloads: 0, draining: false))

    init(
        configuration: RelayConfiguration, parts: RelayParts, recent: RecentEvents, source: String,
        reader: (@Sendable () throws -> RelaySettings)?
    ) {
        self.current = Locked(configuration)
        self.parts = parts
        self.recent = recent
        self.source = source
        self.reader = reader
    }

    var configuration: RelayConfiguration { current.withLock { $0 } }
    var reloads: Int { state.withLock { $0.reloads } }
    var isDraining: Bool { state.withLock { $0.draining } }
    var log: DeliveryLog { parts.log }
    var metrics: RelayMetrics { parts.metrics }

    func replace(with configuration: RelayConfiguration) {
        current.withLock { $0 = configuration }
        state.withLock { $0.reloads += 1 }
    }

    func startDraining() { state.withLock { $0.draining = true } }
}
