import DeliveryEngine
import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore
import RelayStore
import ServiceLifecycle
import Tracing

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
    /// Admit → plan → deliver → keep, and the newest-relayed mark.
    let path: EventPath
    let clock: any DeliveryClock
    let metrics: RelayMetrics
    let logger: Logger
    private let sightings = NIOLockedValueBox<[String: (version: Int64, at: Date)]>([:])
    /// Settled to poll before the interval is over (a project taken over, a stop); replaced after each wait.
    private let nudge = NIOLockedValueBox(Settlement<Bool>())
    /// Who polls a project (with a shared store, the replica that holds it).
    var admission: any Admission { path.admission }
    var marks: RelayMarks { path.marks }

    init(settings: Settings, configuration: ConfigurationStore, path: EventPath, clock: any DeliveryClock, metrics: RelayMetrics, logger: Logger) {
        (self.settings, self.configuration, self.path, self.clock, self.metrics) = (settings, configuration, path, clock, metrics)
        var logger = logger
        logger[metadataKey: "source"] = "poll"
        self.logger = logger
    }

    func run() async throws {
        let stopped = NIOLockedValueBox(false)
        await withDiscardingTaskGroup { group in
            // A replica that takes a project over polls at once: the holder before it may have died between a
            // publish and its next poll.
            group.addTask { [admission] in
                for await _ in admission.takeovers { self.pollSoon() }
            }
            await withGracefulShutdownHandler {
                repeat {
                    // A stop cancels a poll under way: its Remote Config call and any wait to retry end at once.
                    await cancelWhenGracefulShutdown { await self.pollOnce() }
                    marks.persist(logger: logger)
                    let wake = nudge.withLockedValue { $0 }
                    _ = await wake.value(within: settings.interval, on: clock)
                    nudge.withLockedValue { if $0 === wake { $0 = Settlement() } }
                } while !stopped.withLockedValue({ $0 })
            } onGracefulShutdown: {
                stopped.withLockedValue { $0 = true }
                self.pollSoon()
            }
            group.cancelAll()
        }
        marks.persist(logger: logger)
    }

    /// Ends the wait for the next poll now.
    func pollSoon() { nudge.withLockedValue { $0 }.settle(true) }

    /// Polls every project configured now, one after another (a poll is one small request per project).
    func pollOnce() async {
        let current = configuration.current
        for id in current.projects.ids {
            guard !Task.isCancelled, let pipeline = current.projects[id], let claim = admission.pollClaim(id) else { continue }
            // Each project's poll is a trace of its own, with its Remote Config calls and what it relays.
            await Traces.withSpan("catch-up poll", context: .topLevel) { span in
                var logger = logger
                logger[metadataKey: "project"] = "\(id)"
                if let trace = Traces.traceID(of: span?.context) { logger[metadataKey: "trace_id"] = "\(trace)" }
                span?.attributes["rc_relay.project"] = id
                let outcome = await poll(id, pipeline, claim: claim, in: current, logger: logger)
                span?.attributes["rc_relay.poll"] = outcome.rawValue
                metrics.poll(outcome: outcome.rawValue)
            }
        }
    }

    enum Outcome: String {
        case current, relayed, waiting, failed
        /// Relayed, and its delivery still under way (nothing to keep it), or not started yet: the next poll joins.
        case pending
    }

    private func poll(
        _ project: String, _ pipeline: ProjectDirectory.Pipeline, claim: PollClaim, in configuration: RelayConfiguration, logger: Logger
    ) async -> Outcome {
        let current = configuration.settings
        let calls = RemoteConfigCalls(client: pipeline.remoteConfig, policy: current.retryPolicy, clock: clock, metrics: metrics)
        // The poll is decided under its claim (with a shared store, the epoch of the hold), from the newest version anyone
        // relayed: a replica that just took the project over starts where the previous holder left off.
        let known: Int64?
        do {
            known = try await marks.everyones(project)
        } catch {
            logger.warning("poll failed: the shared store did not say which version was relayed last; the next poll tries again")
            return .failed
        }
        let versions: [TemplateVersion]
        let listedNothing: Bool
        do {
            (versions, listedNothing) = try await newer(than: known, project: project, calls: calls, logger: logger)
        } catch {
            logger.warning("poll failed: Remote Config gave no version list; the next poll tries again", metadata: ["error": "\(error)"])
            return .failed
        }
        guard let newest = versions.max(by: { $0.versionNumber < $1.versionNumber }) else {
            if known == nil, listedNothing {  // nothing published yet: the first publish is news
                await marks.adopt(project, 0, logger: logger)
            }
            return .current
        }
        guard let known else {
            // Nothing relayed on record: adopt the current version without a ping (no ping storm on every start).
            await marks.adopt(project, newest.versionNumber, logger: logger)
            logger.info("poll: adopted the current version without a ping", metadata: ["version": "\(newest.versionNumber)"])
            return .current
        }
        // An unreadable updateTime counts from when the poll first saw the version, so the webhook still gets its grace.
        let published = newest.updateTime.flatMap(Self.date) ?? firstSeen(project, newest.versionNumber)
        if clock.now() < published + seconds(settings.grace) {
            logger.debug("poll: a new version is inside its grace period; waiting for its webhook", metadata: ["version": "\(newest.versionNumber)"])
            return .waiting
        }
        var logger = logger
        logger[metadataKey: "version"] = "\(newest.versionNumber)"
        logger.notice(
            "poll: relaying a version no webhook announced",
            metadata: ["missed": "\(versions.count)", "last_relayed": "\(known)"])
        return await relay(newest, since: known, project: project, claim: claim, in: configuration, logger: logger)
    }

    /// The versions newer than `known`, newest first, from as many pages as it takes (bounded, and never a page
    /// token twice: a list that loops ends there). With nothing known, just the newest.
    private func newer(than known: Int64?, project: String, calls: RemoteConfigCalls, logger: Logger) async throws(RemoteConfigError) -> (
        [TemplateVersion], listedNothing: Bool
    ) {
        let deadline = clock.instant() + settings.interval * 0.9  // one bound for the whole poll: retries end before the next
        var found: [TemplateVersion] = []
        var listed = 0
        var token: String?
        var seen: Set<String> = []
        for _ in 0..<settings.maximumPages {
            let size = known == nil ? 1 : settings.pageSize
            let page = try await calls.run("listVersions", within: max(.zero, deadline - clock.instant()), logger: logger) {
                [token] timeLeft async throws(RemoteConfigError) in
                try await calls.client.listVersions(project: project, pageSize: size, pageToken: token, timeout: timeLeft)
            }
            var reachedKnown = known == nil
            listed += page.versions.count + page.skipped
            if page.skipped > 0 { logger.warning("poll: listed versions that are not objects were skipped", metadata: ["count": "\(page.skipped)"]) }
            for data in page.versions {
                guard let version = try? JSONDecoder().decode(TemplateVersion.self, from: data) else {
                    logger.warning("poll: a listed version is not a template version; skipped", metadata: ["bytes": "\(data.count)"])
                    continue
                }
                if let known, version.versionNumber <= known { reachedKnown = true } else { found.append(version) }
            }
            guard !reachedKnown, let next = page.nextPageToken else { return (found, listed == 0) }
            guard seen.insert(next).inserted else {
                logger.error("poll: listVersions returned a page token it gave before; using the versions read so far")
                return (found, listed == 0)
            }
            token = next
        }
        logger.warning("poll: more versions than one poll reads; using the newest", metadata: ["pages": "\(settings.maximumPages)"])
        return (found, listed == 0)
    }

    /// Sends `version` down the event path as a `poll` event: relayed once it is delivered or safely kept.
    private func relay(
        _ version: TemplateVersion, since known: Int64, project: String, claim: PollClaim, in configuration: RelayConfiguration,
        logger: Logger
    ) async -> Outcome {
        let record = EventRecord(
            keys: EventRecord.keys(project: project, version: version.versionNumber), project: project, eventID: nil, format: "poll",
            version: version, receivedAt: clock.now())
        // Fenced: a poll that outlived its claim (paused, or slow retries) admits nothing.
        switch await path.relay(record, arriving: .poll(claim, since: known), in: configuration, logger: logger) {
        case .settled(let reports, _) where reports.contains(where: \.unfinished):
            logger.warning("poll: the version's pings ran out of retries; the next poll tries again")
            return .failed
        case .settled(_, let duplicate):
            if duplicate { logger.info("poll: a webhook had announced the version already") }
            return .relayed
        case .kept:
            return .relayed
        case .underWay:
            logger.info("poll: the version's delivery continues (or a webhook's kept event delivers it); the next poll joins it")
            return .pending
        case .notStarted(.unplanned):
            return .failed
        case .notStarted(.left):
            return .pending
        case .notStarted:
            logger.warning("poll: the delivery could not start now; the next poll tries again")
            return .pending
        }
    }

    /// When the poll first saw a version (kept for the newest version of each project only).
    private func firstSeen(_ project: String, _ version: Int64) -> Date {
        sightings.withLockedValue { sightings in
            if let seen = sightings[project], seen.version == version { return seen.at }
            let now = clock.now()
            sightings[project] = (version, now)
            return now
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
