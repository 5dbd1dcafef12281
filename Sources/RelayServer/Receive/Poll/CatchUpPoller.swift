import DeliveryEngine
import FCMClient
import Foundation
import Logging
import RelayCore
import ServiceLifecycle

/// Catch-up polling: every `poll.intervalSeconds`, each project's newest versions from Remote Config's
/// `listVersions`. A version newer than any relayed, older than the grace period and still unannounced by a webhook,
/// is relayed as an event of its own (format `poll`) through the same deduplication, so a webhook and a poll of one
/// version make one ping. Missed versions coalesce: the newest is pinged once, since a ping means "fetch the latest".
/// The first poll of a project with nothing relayed on record adopts its current version unpinged.
final class CatchUpPoller: Service {
    struct Settings: Sendable {
        var interval: Duration
        /// How long after a version's `updateTime` a webhook has to announce it before the poll does.
        var grace: Duration
        /// Versions read per `listVersions` page, and pages read per poll at most.
        var pageSize = 20
        var maximumPages = 15
    }

    let settings: Settings
    let configuration: ConfigurationStore
    let engine: DeliveryEngine
    let relayed: RelayedVersions
    let clock: any DeliveryClock
    let metrics: RelayMetrics
    let logger: Logger

    init(
        settings: Settings, configuration: ConfigurationStore, engine: DeliveryEngine, relayed: RelayedVersions, clock: any DeliveryClock,
        metrics: RelayMetrics, logger: Logger
    ) {
        (self.settings, self.configuration, self.engine, self.relayed, self.clock, self.metrics) =
            (settings, configuration, engine, relayed, clock, metrics)
        var logger = logger
        logger[metadataKey: "source"] = "poll"
        self.logger = logger
    }

    func run() async throws {
        let stop = Settlement<Bool>()
        await withGracefulShutdownHandler {
            repeat {
                await pollOnce()
                relayed.persist(logger: logger)
            } while await stop.value(within: settings.interval, on: clock) == nil
        } onGracefulShutdown: {
            stop.settle(true)
        }
        relayed.persist(logger: logger)
    }

    /// Polls every project configured now, one after another (a poll is one small request per project).
    func pollOnce() async {
        let current = configuration.current
        for id in current.projects.ids {
            guard let pipeline = current.projects[id] else { continue }
            var logger = logger
            logger[metadataKey: "project"] = "\(id)"
            metrics.poll(outcome: await poll(id, pipeline, settings: current.settings, logger: logger).rawValue)
        }
    }

    enum Outcome: String {
        case current, relayed, waiting, failed
    }

    private func poll(_ project: String, _ pipeline: ProjectDirectory.Pipeline, settings current: RelaySettings, logger: Logger) async -> Outcome {
        let calls = RemoteConfigCalls(client: pipeline.remoteConfig, policy: current.retryPolicy, clock: clock, metrics: metrics)
        let known = relayed.newest(project)
        let versions: [TemplateVersion]
        do {
            versions = try await newer(than: known, project: project, calls: calls, logger: logger)
        } catch {
            logger.warning("poll failed: Remote Config gave no version list; the next poll tries again", metadata: ["error": "\(error)"])
            return .failed
        }
        guard let newest = versions.max(by: { $0.versionNumber < $1.versionNumber }) else {
            if known == nil { relayed.note(project, 0) }  // nothing published yet: the first publish is news
            return .current
        }
        guard let known else {
            // Nothing relayed on record: adopt the current version without a ping (no ping storm on every start).
            relayed.note(project, newest.versionNumber)
            logger.info("poll: adopted the current version without a ping", metadata: ["version": "\(newest.versionNumber)"])
            return .current
        }
        if let published = newest.updateTime.flatMap(Self.date), clock.now() < published + seconds(settings.grace) {
            logger.debug("poll: a new version is inside its grace period; waiting for its webhook", metadata: ["version": "\(newest.versionNumber)"])
            return .waiting
        }
        var logger = logger
        logger[metadataKey: "version"] = "\(newest.versionNumber)"
        logger.notice(
            "poll: relaying a version no webhook announced",
            metadata: ["missed": "\(versions.count)", "last_relayed": "\(known)"])
        return await relay(newest, project: project, pipeline: pipeline, wait: current.answerWithin, logger: logger) ? .relayed : .failed
    }

    /// The versions newer than `known`, newest first, from as many pages as it takes (bounded, and never a page
    /// token twice: a list that loops ends there). With nothing known, just the newest.
    private func newer(than known: Int64?, project: String, calls: RemoteConfigCalls, logger: Logger) async throws(RemoteConfigError) -> [TemplateVersion] {
        var found: [TemplateVersion] = []
        var token: String?
        var seen: Set<String> = []
        for _ in 0..<settings.maximumPages {
            let size = known == nil ? 1 : settings.pageSize
            let page = try await calls.run("listVersions", within: settings.interval, logger: logger) { [token] () async throws(RemoteConfigError) in
                try await calls.client.listVersions(project: project, pageSize: size, pageToken: token)
            }
            var reachedKnown = known == nil
            for data in page.versions {
                guard let version = try? JSONDecoder().decode(TemplateVersion.self, from: data) else {
                    logger.warning("poll: a listed version is not a template version; skipped", metadata: ["bytes": "\(data.count)"])
                    continue
                }
                if let known, version.versionNumber <= known { reachedKnown = true } else { found.append(version) }
            }
            guard !reachedKnown, let next = page.nextPageToken else { return found }
            guard seen.insert(next).inserted else {
                logger.error("poll: listVersions returned a page token it gave before; using the versions read so far")
                return found
            }
            token = next
        }
        logger.warning("poll: more versions than one poll reads; using the newest", metadata: ["pages": "\(settings.maximumPages)"])
        return found
    }

    /// Delivers `version` as a `poll` event; true once it is delivered or safely spooled (then it counts as relayed).
    private func relay(_ version: TemplateVersion, project: String, pipeline: ProjectDirectory.Pipeline, wait: Duration, logger: Logger) async -> Bool {
        let record = SpoolRecord(
            keys: ["\(project)/version/\(version.versionNumber)"], project: project, eventID: nil, format: "poll", version: version,
            receivedAt: clock.now())
        let plan = pipeline.plan(for: version, project: project)
        switch await engine.deliver(record, plan: plan, origin: .poll, wait: wait, logger: logger) {
        case .settled(let reports, let duplicate):
            guard !reports.contains(where: \.unfinished) else {
                logger.warning("poll: the version's pings ran out of retries; the next poll tries again")
                return false
            }
            if duplicate { logger.info("poll: a webhook had announced the version already") }
            relayed.note(project, version.versionNumber)
            return true
        case .pending(let delivery, _):
            guard engine.hasSpool, let acknowledgement = try? engine.acknowledge(delivery) else {
                logger.info("poll: the version's delivery continues; the next poll joins it")
                return false
            }
            if case .settled(let reports) = acknowledgement, reports.contains(where: \.unfinished) { return false }
            relayed.note(project, version.versionNumber)
            return true
        case .conflict, .saturated, .stopping:
            logger.warning("poll: the delivery could not start now; the next poll tries again")
            return false
        }
    }

    private func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// RFC 3339 as Remote Config writes it, with or without fractional seconds.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }
}
