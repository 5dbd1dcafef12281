import DeliveryEngine
import Foundation
import Logging

/// Reads the configuration file again and swaps the whole configuration in one step, or keeps the running one when
/// the new file is refused. Settings bound at start (listeners, storage, pools) that differ from the start's are
/// reported as needing a restart, at every reload until the restart.
struct Reloader: Sendable {
    struct Reloaded: Sendable {
        var loadedAt: Date
        var restartRequired: [String]
    }

    let configuration: ConfigurationStore
    /// The settings the process started with: what runs of everything a reload cannot change.
    let started: RelaySettings
    /// Reads the file again; nil when there is no file to read (the development profile).
    let reader: (@Sendable () throws -> RelaySettings)?
    /// Builds a configuration from settings (credentials, token caches, verifiers), as the start did.
    let rebuild: @Sendable (RelaySettings) async throws -> RelayConfiguration
    /// One reload at a time (SIGHUP and the admin API may ask together), so the file read last is the one in force.
    private let oneAtATime = OutboundLimit(limit: 1)

    init(
        configuration: ConfigurationStore, reader: (@Sendable () throws -> RelaySettings)?,
        rebuild: @escaping @Sendable (RelaySettings) async throws -> RelayConfiguration
    ) {
        (self.configuration, self.reader, self.rebuild) = (configuration, reader, rebuild)
        started = configuration.current.settings
    }

    func reload() async -> Result<Reloaded, ConfigurationError> {
        await oneAtATime.run { await reloadNow() }
    }

    private func reloadNow() async -> Result<Reloaded, ConfigurationError> {
        guard let reader else {
            return .failure(
                ConfigurationError(key: "--config", problem: "the development profile has no file to read", fix: "start rc-relay with --config FILE"))
        }
        let settings: RelaySettings
        let built: RelayConfiguration
        do {
            settings = try reader()
            built = try await rebuild(settings)
        } catch let error as ConfigurationError {
            return .failure(error)
        } catch {
            return .failure(ConfigurationError(key: "--config", problem: "\(error)", fix: "check the file with rc-relay check-config"))
        }
        // Compared with the start, not with the last reload: a setting a reload changed still waits for the restart.
        if settings.webhookAuth == .none, started.poll == nil {
            // Webhooks would stop at once, and polling only starts with a restart: nothing would be relayed meanwhile.
            return .failure(
                ConfigurationError(
                    key: "webhook.auth", problem: "poll-only mode needs catch-up polling, which this process did not start with",
                    fix: "restart rc-relay to switch to poll-only mode"))
        }
        configuration.replace(with: built)
        return .success(Reloaded(loadedAt: built.loadedAt, restartRequired: RelaySettings.restartRequired(started, settings)))
    }
}
