import DeliveryEngine
import FCMClient
import Foundation
import Logging
import RelayCore

/// Whether a received version number is one Remote Config could have published. Its numbers count up by one per
/// publish or rollback, so a version more than ``margin`` beyond the newest known one (or beyond ``margin`` when none
/// is known) is checked: where the relay can ask Remote Config (catch-up polling is on, or a route is change-aware),
/// a version its `listVersions` does not reach is an **outlier**; where it cannot ask, every such version is. An outlier
/// is relayed (its pings go at once, unscheduled) but moves no mark: not the newest version relayed (polling), not a
/// wave's or a quiet period's version, not what superseding compares against. One signed webhook with a huge number
/// cannot silence a project (docs/webhook.md, version numbers).
struct VersionCheck: Sendable {
    /// How far beyond the newest known version a version may be without a check.
    static let margin: Int64 = 100_000

    let clock: any DeliveryClock
    let metrics: RelayMetrics

    /// Whether `number` is an outlier for the project, whose newest known version is `known`.
    func isOutlier(
        _ number: Int64, known: Int64?, project: String, pipeline: ProjectDirectory.Pipeline, settings: RelaySettings, logger: Logger
    ) async -> Bool {
        guard number > Self.margin, number - Self.margin > (known ?? 0) else { return false }
        var listed: Int64?
        if settings.poll != nil || pipeline.routes.isChangeAware {
            let calls = RemoteConfigCalls(client: pipeline.remoteConfig, policy: settings.retryPolicy, clock: clock, metrics: metrics)
            do {
                let page = try await calls.run("listVersions", within: settings.answerWithin / 2, logger: logger) {
                    timeLeft async throws(RemoteConfigError) in
                    try await pipeline.remoteConfig.listVersions(project: project, pageSize: 1, timeout: timeLeft)
                }
                listed = page.versions.first.flatMap { try? JSONDecoder().decode(TemplateVersion.self, from: $0) }?.versionNumber
                if let listed, number <= listed { return false }
            } catch {
                logger.warning("Remote Config could not say whether a far-off version exists", metadata: ["error": "\(error)"])
            }
        }
        logger.warning(
            "version far beyond the newest known one, and not one Remote Config lists: relayed without moving the marks",
            metadata: ["known": "\(known.map(String.init) ?? "none")", "listed": "\(listed.map(String.init) ?? "unknown")"])
        return true
    }
}
