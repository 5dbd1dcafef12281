import DeliveryEngine
import Foundation
import Logging
import PostgresNIO

/// What replicas tell each other through PostgreSQL's `NOTIFY`: an event admitted, a ping discarded, marks reset.
extension PostgresStore {
    /// The channel a replica is told on when another admits an event.
    package static let channel = "rc_relay_events"

    /// The notice's payload: the project, and the replica that admitted the event (which delivers it itself when it
    /// holds the lease, so it ignores its own notices).
    static func notice(project: String, holder: String) -> String { project + "\n" + holder }

    /// Calls `onEvent` with the project of each event another replica admits, until cancelled or the connection
    /// drops (the caller listens again; its regular sweep covers the gap).
    package func listen(_ onEvent: @escaping @Sendable (String) -> Void) async throws(StoreError) {
        let holder = holder
        try await listen(on: Self.channel) { payload in
            let parts = payload.split(separator: "\n", maxSplits: 1).map(String.init)
            guard parts.count == 2, parts[1] != holder else { return }
            onEvent(parts[0])
        }
    }

    /// The channel an operator's discard of a ping is passed on, to the replica that delivers its project.
    package static let discards = "rc_relay_discards"

    /// Tells every replica to discard the route's dead ping of the event under `key` (the one delivering it does).
    package func requestDiscard(key: String, route: String) async throws(StoreError) {
        let payload = route + "\n" + key
        try await run("discard") { client, logger in
            try await client.query("SELECT pg_notify(\(Self.discards), \(payload))", logger: logger)
        }
    }

    /// Calls `onDiscard` with the event's key and the route of each discard an operator asked another replica for,
    /// until cancelled or the connection drops.
    package func listenForDiscards(_ onDiscard: @escaping @Sendable (_ key: String, _ route: String) -> Void) async throws(StoreError) {
        try await listen(on: Self.discards) { payload in
            // The route first: a route name has no line break, an event's key may.
            let parts = payload.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2 else { return }
            onDiscard(parts[1], parts[0])
        }
    }

    /// The channel an operator's reset of a project's marks is passed on (every replica forgets them).
    package static let resets = "rc_relay_resets"

    /// Tells every replica to forget the project's marks, reset to `generation` (``resetRelayed(project:)``).
    package func requestReset(project: String, generation: Int64) async throws(StoreError) {
        let payload = project + "\n" + String(generation)
        try await run("reset") { client, logger in
            try await client.query("SELECT pg_notify(\(Self.resets), \(payload))", logger: logger)
        }
    }

    /// Calls `onReset` with each project whose marks an operator reset, and its generation (nil from an older
    /// replica's notice), until cancelled or the connection drops.
    package func listenForResets(_ onReset: @escaping @Sendable (_ project: String, _ generation: Int64?) -> Void) async throws(StoreError) {
        try await listen(on: Self.resets) { payload in
            let parts = payload.split(separator: "\n", maxSplits: 1).map(String.init)
            guard let project = parts.first else { return }
            onReset(project, parts.count == 2 ? Int64(parts[1]) : nil)
        }
    }

    func listen(on channel: String, _ body: @escaping @Sendable (String) -> Void) async throws(StoreError) {
        do {
            try await client.withConnection { connection in
                try await connection.listen(on: channel) { notifications in
                    for try await notification in notifications { body(notification.payload) }
                }
            }
        } catch {
            throw Self.storeError(error)
        }
    }
}
