import DeliveryEngine
import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore

/// Everything built from the settings that a reload replaces at once: routes, credentials, verifiers, tokens.
/// Deliveries under way keep the configuration they started with.
///
/// A class, not a struct: every request reads the configuration in force a few times, and a copy of the struct
/// retained and released each of its settings' dozens of strings and arrays (issue #35's profile); a copy of this is
/// one reference.
final class RelayConfiguration: Sendable {
    let settings: RelaySettings
    let projects: ProjectDirectory
    let idTokens: IDTokenVerifier?
    let loadedAt: Date

    init(settings: RelaySettings, projects: ProjectDirectory, idTokens: IDTokenVerifier?, loadedAt: Date) {
        (self.settings, self.projects, self.idTokens, self.loadedAt) = (settings, projects, idTokens, loadedAt)
    }
}

/// The configuration in force, swapped whole on reload, with where it came from. What the parts that read the
/// configuration are given (intake, admin, probes, middlewares), instead of the whole relay.
final class ConfigurationStore: Sendable {
    /// The configuration file, or `development profile`.
    let source: String
    let startedAt = Date()
    private let state: NIOLockedValueBox<(current: RelayConfiguration, reloads: Int)>

    init(_ configuration: RelayConfiguration, source: String) {
        self.state = NIOLockedValueBox((configuration, 0))
        self.source = source
    }

    var current: RelayConfiguration { state.withLockedValue { $0.current } }
    var reloads: Int { state.withLockedValue { $0.reloads } }

    func replace(with configuration: RelayConfiguration) {
        state.withLockedValue { state in
            state.current = configuration
            state.reloads += 1
        }
    }
}

/// Whether a stop has begun: readiness turns false and new webhooks are refused.
final class DrainState: Sendable {
    private let draining = NIOLockedValueBox(false)

    var isDraining: Bool { draining.withLockedValue { $0 } }

    func start() { draining.withLockedValue { $0 = true } }
}
