/// What other replicas tell this one through PostgreSQL's `LISTEN`: an event admitted for a project this replica
/// delivers, an operator's discard, an operator's reset of a project's marks. Each listens on a connection of its own
/// and listens again a second after the connection drops; the sweeps at each renewal cover what a gap missed.
extension ProjectLeases {
    /// Another replica's `NOTIFY` starts the delivery at once.
    func listenUntilCancelled() async {
        await listening("new events") { () throws(StoreError) in try await self.store.listen { project in self.requestSweep(project) } }
    }

    /// An operator's discard through another replica's admin API: the replica delivering the event discards it.
    func listenForDiscardsUntilCancelled() async {
        await listening("discards") { () throws(StoreError) in
            try await self.store.listenForDiscards { key, route in
                guard self.engine.discard(key: key, route: route) else { return }
                self.logger.notice("admin discard applied, asked through another replica", metadata: ["key": "\(key)", "route": "\(route)"])
            }
        }
    }

    /// An operator's reset of a project's marks through any replica: every replica forgets them.
    func listenForResetsUntilCancelled() async {
        await listening("resets") { () throws(StoreError) in
            try await self.store.listenForResets { project, generation in
                if self.noteReset(project, generation: generation) { self.resetApplied(project) }
            }
        }
    }

    /// Runs `listen` until cancelled, again a second after each time it ends (a dropped connection).
    private func listening(_ what: String, _ listen: () async throws(StoreError) -> Void) async {
        while !Task.isCancelled {
            do {
                try await listen()
            } catch {
                if !Task.isCancelled { logger.debug("listening for \(what) stopped", metadata: ["error": "\(error)"]) }
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}
