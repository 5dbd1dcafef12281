import FCMClient
import Foundation
import Logging
import NIOConcurrencyHelpers

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
