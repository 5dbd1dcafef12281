import Logging
import RelayStore

/// The newest version relayed per project: the one place it is read and moved. It is this process's
/// (``RelayedVersions``, kept beside the spool) and, with a shared store, every replica's (``Admission/relayed(_:)``;
/// the store moves its own when an outbox event settles). Three hands move it, each through one method here:
/// ``EventPath`` when it relays a version, catch-up polling when it adopts one unpinged, an operator's reset.
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
