import Foundation
import RelayStore

/// What other replicas tell this one through PostgreSQL's `LISTEN`: an event admitted for a project this replica
/// delivers, an operator's discard, an operator's reset of a project's marks. Each listens on a connection of its own
/// and listens again a second after the connection drops; the sweeps at each renewal cover what a gap missed.
extension ProjectLeases {
    /// Another replica's `NOTIFY` starts the delivery at once; the sweeps at each renewal cover what a dropped
    /// connection missed.
    func listenUntilCancelled() async {
        while !Task.isCancelled {
            do {
                try await store.listen { project in self.requestSweep(project) }
            } catch {
                if !Task.isCancelled { logger.debug("listening for new events stopped", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// An operator's discard through another replica's admin API: the replica delivering the event discards it.
    func listenForDiscardsUntilCancelled() async {
        while !Task.isCancelled {
            do {
                try await store.listenForDiscards { key, route in
                    guard self.engine.discard(key: key, route: route) else { return }
                    self.logger.notice("admin discard applied, asked through another replica", metadata: ["key": "\(key)", "route": "\(route)"])
                }
            } catch {
                if !Task.isCancelled { logger.debug("listening for discards stopped", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    /// An operator's reset of a project's marks through any replica: every replica forgets them.
    func listenForResetsUntilCancelled() async {
        while !Task.isCancelled {
            do {
                try await store.listenForResets { project in self.resetApplied(project) }
            } catch {
                if !Task.isCancelled { logger.debug("listening for resets stopped", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
