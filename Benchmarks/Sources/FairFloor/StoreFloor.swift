import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// The store floor (issue #35's target with `store.postgres`): with `FAIR_FLOOR_POSTGRES` set to a `postgres://` URL,
/// the fair floor also owes what any relay on a shared store owes, and nothing of rc-relay's own:
/// - the event is committed (durably, the server's default) before the caller is answered, under a unique key, so
///   replicas relay it once: an insert that finds its key taken is a duplicate, answered without a send;
/// - the admissions that arrive while one is on its way share the next round trip and commit (up to 64, two rounds in
///   flight), as any relay under load must batch them;
/// - once FCM accepts the send, the event is marked settled, in batches, off the caller's path (a replica that takes
///   over must not send it again);
/// - what is settled is forgotten once its deduplication window has passed (`FAIR_FLOOR_DEDUP_WINDOW_SECONDS`, 600 by
///   default, as rc-relay's `delivery.dedupWindowSeconds`), one statement a second, as any store must or it grows for
///   ever.
/// rc-relay writes more (three keys per CloudEvent, the delivery history's copies, the newest version relayed, a
/// notice to the lease holder); the floor's figure is what a store costs before any of that.
final class StoreFloor: Sendable {
    let client: PostgresClient
    private let admissions = NIOLockedValueBox(Admissions())
    private let settled = NIOLockedValueBox<[String]>([])
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    private let window: Int

    private struct Waiting {
        var key: String
        var record: String
        var answer: CheckedContinuation<Result<Bool, any Error>, Never>
    }

    private struct Admissions {
        var waiting: [Waiting] = []
        var rounds = 0
    }

    struct BadURL: Error {}

    init(url: String, logger: Logger) throws {
        guard let parts = URLComponents(string: url), let host = parts.host, let user = parts.user else { throw BadURL() }
        var configuration = PostgresClient.Configuration(
            host: host, port: parts.port ?? 5432, username: user, password: parts.password, database: String(parts.path.dropFirst()),
            tls: .disable)
        configuration.options.maximumConnections = 16
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        window = ProcessInfo.processInfo.environment["FAIR_FLOOR_DEDUP_WINDOW_SECONDS"].flatMap(Int.init) ?? 600
    }

    /// The connection pool and the settlements' writer; then the table, once the pool runs.
    func start() async throws {
        Task { await client.run() }
        Task { await settle() }
        try await client.query(
            """
            CREATE TABLE IF NOT EXISTS floor_events (id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, record text NOT NULL,
                settled boolean NOT NULL DEFAULT false, settled_at timestamptz)
            """)
        Task { await prune() }
    }

    /// Forgets the events settled longer ago than the window, once a second: those below the oldest event still
    /// pending or settled within the window, found by walking the primary key from its start (so a round that finds
    /// nothing to forget reads one row).
    private func prune() async {
        let window = Double(self.window)
        while true {
            try? await Task.sleep(for: .seconds(1))
            _ = try? await client.query(
                """
                DELETE FROM floor_events WHERE id < coalesce((SELECT id FROM floor_events
                    WHERE NOT settled OR settled_at >= now() - make_interval(secs => \(window)) ORDER BY id LIMIT 1), 9223372036854775807)
                """)
        }
    }

    /// True once the event is committed; false when its key was committed before (a duplicate).
    func admit(key: String, record: String) async throws -> Bool {
        try await withCheckedContinuation { answer in
            let start = admissions.withLockedValue { state in
                state.waiting.append(Waiting(key: key, record: record, answer: answer))
                guard state.rounds < 2 else { return false }
                state.rounds += 1
                return true
            }
            if start { Task { await self.rounds() } }
        }.get()
    }

    private func rounds() async {
        while true {
            let batch = admissions.withLockedValue { state in
                let batch = Array(state.waiting.prefix(64))
                state.waiting.removeFirst(batch.count)
                if batch.isEmpty { state.rounds -= 1 }
                return batch
            }
            guard !batch.isEmpty else { return }
            let (keys, records) = (batch.map(\.key), batch.map(\.record))
            do {
                var admitted = Set<String>()
                let rows = try await client.query(
                    """
                    INSERT INTO floor_events (key, record) SELECT * FROM unnest(\(keys)::text[], \(records)::text[])
                    ON CONFLICT (key) DO NOTHING RETURNING key
                    """)
                for try await key in rows.decode(String.self) { admitted.insert(key) }
                for waiting in batch { waiting.answer.resume(returning: .success(admitted.contains(waiting.key))) }
            } catch {
                for waiting in batch { waiting.answer.resume(returning: .failure(error)) }
            }
        }
    }

    /// Marks the event settled, in the next batch.
    func settled(_ key: String) {
        settled.withLockedValue { $0.append(key) }
        wake.yield()
    }

    private func settle() async {
        for await _ in wakes {
            let keys = settled.withLockedValue { keys in
                defer { keys = [] }
                return keys
            }
            guard !keys.isEmpty else { continue }
            _ = try? await client.query(
                "UPDATE floor_events SET settled = true, settled_at = now(), record = '' WHERE key = ANY(\(keys)) AND NOT settled")
        }
    }
}
