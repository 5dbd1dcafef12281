import DeliveryEngine
import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore
import RelayStore

/// The newest version relayed per project: the one place it is read and moved, with what it decides, whether a
/// received version is an outlier (``VersionCheck``, below). It is this process's (``RelayedVersions``, below, kept
/// beside the spool) and, with a shared store, every replica's (``Admission/relayed(_:)``; the store moves its own when
/// an outbox event settles). Three hands move it, each through one method here: ``EventPath`` when it relays a version,
/// catch-up polling when it adopts one unpinged, an operator's reset.
struct RelayMarks: Sendable {
    let local: RelayedVersions
    let admission: any Admission

    /// The newest version relayed for `project` in this process, if any is known.
    func newest(_ project: String) -> Int64? { local.newest(project) }

    /// The newest version known to be relayed, for a received version `number`: this process's, or, when `number` is
    /// far beyond it, any replica's (a replica that just started knows nothing yet, and must not take a far-off number
    /// for a real one: issue #50). Nil when none is known.
    func known(_ project: String, beside number: Int64) async -> Int64? {
        let known = local.newest(project)
        guard number > VersionCheck.margin, number - VersionCheck.margin > known ?? 0 else { return known }
        return (try? await everyones(project)) ?? known
    }

    /// The newest version any replica relayed, read from the shared store and noted here (a poll starts from it, so a
    /// replica that just took a project over starts where the previous holder left off); throws when the store does not
    /// answer.
    func everyones(_ project: String) async throws(StoreError) -> Int64? {
        let known = local.newest(project)
        guard let shared = try await admission.relayed(project) else { return known }
        local.note(project, shared)
        return max(known ?? shared, shared)
    }

    /// `version` of `project` was relayed: delivered, or kept where its delivery goes on. ``EventPath`` alone says so.
    func relayed(_ project: String, _ version: Int64, logger: Logger) { local.note(project, version, logger: logger) }

    /// `version` is taken as relayed without a ping (a poll's first sight of a project), here and for every replica.
    func adopt(_ project: String, _ version: Int64, logger: Logger) async {
        local.note(project, version, logger: logger)
        await admission.noteRelayed(project, version)
    }

    /// Forgets this process's mark for the project (an operator's reset; the store forgets its own).
    func reset(_ project: String, logger: Logger) { local.reset(project, logger: logger) }

    /// Writes this process's marks if they changed (catch-up polling, after each round and at a stop).
    func persist(logger: Logger) { local.persist(logger: logger) }
}

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

/// The newest template version relayed per project, whatever brought it (a webhook, a Pub/Sub push, a poll): what
/// catch-up polling compares Remote Config's list with. Kept in `state/relayed-versions.json` under the directory
/// acknowledged events are kept in, when there is one, so a version published while the relay was down is pinged once
/// on the next start; without one, a start adopts the current version unpinged (no ping storm on every restart).
final class RelayedVersions: Sendable {
    private struct State {
        var newest: [String: Int64] = [:]
        var dirty = false
    }

    private let state: NIOLockedValueBox<State>
    private let file: URL?
    /// Write on every note (catch-up polling runs, so the file must not lag behind webhooks after a crash).
    private let writesEachNote: Bool
    /// Projects kept at most (the configuration's; a bound against a file that grew by other hands).
    static let maximumProjects = 1000

    /// `directory`: where acknowledged events are kept on disk, or nil. A file that cannot be read is logged and set aside, never trapped on.
    init(directory: String?, writesEachNote: Bool = false, logger: Logger) {
        self.writesEachNote = writesEachNote
        file = directory.map { URL(fileURLWithPath: $0).appendingPathComponent("state").appendingPathComponent("relayed-versions.json") }
        var newest: [String: Int64] = [:]
        if let file, FileManager.default.fileExists(atPath: file.path) {
            if let text = BoundedFile.text(file.path, limit: 1 << 20),
                let decoded = try? JSONDecoder().decode([String: Int64].self, from: Data(text.utf8)),
                decoded.count <= Self.maximumProjects
            {
                newest = decoded.filter { $0.value >= 0 }
            } else {
                logger.error("relayed-versions state is not readable: starting without it", metadata: ["file": "\(file.path)"])
                try? FileManager.default.removeItem(at: file)
            }
        }
        state = NIOLockedValueBox(State(newest: newest))
    }

    /// The newest version relayed for `project`, if any is known.
    func newest(_ project: String) -> Int64? { state.withLockedValue { $0.newest[project] } }

    /// Notes that `version` of `project` was relayed (or adopted on start); an older version changes nothing.
    func note(_ project: String, _ version: Int64, logger: Logger? = nil) {
        let changed = state.withLockedValue { state in
            guard version > state.newest[project] ?? -1, state.newest.count < Self.maximumProjects || state.newest[project] != nil else {
                return false
            }
            state.newest[project] = version
            state.dirty = true
            return true
        }
        if changed, writesEachNote, let logger { persist(logger: logger) }
    }

    /// Forgets the project's newest version (an operator's reset), on disk too.
    func reset(_ project: String, logger: Logger) {
        state.withLockedValue { state in
            state.newest[project] = nil
            state.dirty = true
        }
        persist(logger: logger)
    }

    /// Writes what changed since the last write (temporary file, fsync, rename); a failure is logged and tried again
    /// at the next poll.
    func persist(logger: Logger) {
        guard let file else { return }
        let snapshot: [String: Int64]? = state.withLockedValue { state in
            guard state.dirty else { return nil }
            state.dirty = false
            return state.newest
        }
        guard let snapshot else { return }
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            let data = try JSONEncoder().encode(snapshot)
            // A temporary file, fsynced, then renamed: a crash leaves the old state or the new, never half of one.
            let temporary = file.deletingLastPathComponent().appendingPathComponent(".relayed-versions.\(UUID().uuidString)")
            guard FileManager.default.createFile(atPath: temporary.path, contents: data) else { throw CocoaError(.fileWriteUnknown) }
            let handle = try FileHandle(forWritingTo: temporary)
            try handle.synchronize()
            try handle.close()
            if rename(temporary.path, file.path) != 0 {
                try? FileManager.default.removeItem(at: temporary)
                throw CocoaError(.fileWriteUnknown)
            }
        } catch {
            state.withLockedValue { $0.dirty = true }
            logger.error("relayed-versions state could not be written", metadata: ["file": "\(file.path)", "error": "\(error)"])
        }
    }
}
