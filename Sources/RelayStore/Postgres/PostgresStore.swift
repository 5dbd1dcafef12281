import DeliveryEngine
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import PostgresNIO
import ServiceLifecycle

/// The state several replicas share, on PostgreSQL: each acknowledged event (the outbox that replaces the spool), its
/// identities (deduplication across replicas), and leases (one replica delivers and polls for a project at a time).
///
/// Every statement runs within ``StoreSettings/statementTimeout``: past it the store counts as unreachable, so a webhook
/// gets `503` instead of waiting for a database that does not answer.
package final class PostgresStore: Service, Sendable {
    package let settings: StoreSettings
    /// This replica's name in leases: host, process and a random part (a restarted process is another holder).
    package let holder: String
    let client: PostgresClient
    let logger: Logger
    /// The engine's spool calls, applied in order by ``run()``.
    package let outbox: OutboxSpool
    /// Admissions waiting for the next round trip.
    let admissions = AdmissionBatcher()
    /// Whether a change was given up (not written) since the last flush: the flush then reports false.
    let givenUp = NIOLockedValueBox(false)
    /// Per project, the row through which every event is settled (``pending(project:pageSize:)`` starts past it).
    let sweptThrough = NIOLockedValueBox<[String: Int64]>([:])
    /// The row through which every event of the projects asked about is settled (``projectsWithPending(_:)`` starts
    /// past it).
    let dueThrough = NIOLockedValueBox<Int64>(0)
    /// Projects whose row of marks this replica has seen settled into (none is ever deleted): a settlement adds the row
    /// only for the others.
    let marked = NIOLockedValueBox<Set<String>>([])
    /// When this replica writes each project's mark, and the marks it holds meanwhile.
    let marksPace = NIOLockedValueBox(MarksPace())

    /// Bounds every statement's wait (the application's clock, whose deadline sweep every part shares).
    let clock: any DeliveryClock
    /// Told each statement's name, duration and failure, for metrics.
    let observe: @Sendable (_ statement: String, _ duration: Duration, _ failed: Bool) -> Void

    package init(
        settings: StoreSettings, logger: Logger, holder: String? = nil, clock: any DeliveryClock = SystemDeliveryClock(),
        observe: @escaping @Sendable (_ statement: String, _ duration: Duration, _ failed: Bool) -> Void = { _, _, _ in }
    ) throws {
        var configuration = PostgresClient.Configuration(
            host: settings.host, port: settings.port, username: settings.username, password: settings.password, database: settings.database,
            tls: try Self.tls(settings))
        configuration.options.connectTimeout = settings.statementTimeout
        configuration.options.maximumConnections = 16
        // The server ends what the relay no longer waits for: a statement, a wait for a lock, an abandoned transaction.
        let milliseconds =
            settings.statementTimeout.components.seconds * 1000 + settings.statementTimeout.components.attoseconds / 1_000_000_000_000_000
        configuration.options.additionalStartupParameters = [
            ("statement_timeout", "\(milliseconds)"), ("lock_timeout", "\(milliseconds)"),
            ("idle_in_transaction_session_timeout", "\(milliseconds * 2)"), ("application_name", "rc-relay"),
            // No JIT compilation: the relay's statements touch a few rows each, but the planner's estimates for some
            // (the pruning above all) pass `jit_above_cost`, and compiling took 15 to 200 ms a statement
            // (docs/performance.md, 2026-12-05).
            ("jit", "off"),
        ]
        self.settings = settings
        self.clock = clock
        self.observe = observe
        self.logger = logger
        self.holder = holder ?? EngineSettings.newReplicaID()
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        outbox = OutboxSpool()
    }

    private static func tls(_ settings: StoreSettings) throws -> PostgresClient.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = settings.caFile {
            tls.additionalTrustRoots = [.file(caFile)]
        }
        switch settings.tls {
        case .disable: return .disable
        case .prefer: return .prefer(tls)
        case .verifyFull: return .require(tls)
        }
    }

    /// Applies the engine's changes until a graceful stop; then applies what is left (the engine stops first and hands
    /// its deliveries over here).
    package func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.applyChanges() }
            try? await gracefulShutdown()
            outbox.finish()
        }
    }

    /// The connection pool, a service of its own: placed before the store in the service group, it stops after the
    /// store has written its last changes (a graceful stop reaches it last), and at the stop's deadline with the rest.
    package var pool: some Service { Pool(client: client) }

    private struct Pool: Service {
        let client: PostgresClient
        func run() async { await client.run() }
    }

    /// The longest a stop waits for the changes still queued before the leases are released (or left to expire).
    package var flushBound: Duration { min(settings.lease, .seconds(5)) }

    // MARK: - Schema

    /// Applies the migrations this database lacks, under an advisory lock: replicas that start at once wait for the
    /// first, which migrates; the others find nothing to do. Returns the versions applied here.
    @discardableResult
    package func migrate() async throws(StoreError) -> [Int] {
        // A transaction of many statements, once per start: not held to one statement's timeout (each of its statements
        // is, on the server).
        try await run("migrate", within: max(settings.statementTimeout, .seconds(60))) { client, logger in
            try await client.withTransaction(logger: logger) { connection -> [Int] in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.migrationLock))", logger: logger)
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS rc_relay_schema (
                        version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                    """, logger: logger)
                var applied: Set<Int> = []
                for try await version in try await connection.query("SELECT version FROM rc_relay_schema", logger: logger).decode(Int.self) {
                    applied.insert(version)
                }
                if let newest = applied.max(), newest > Migrations.latest {
                    throw StoreError.schemaTooNew(found: newest, known: Migrations.latest)
                }
                var now: [Int] = []
                for step in Migrations.steps where !applied.contains(step.version) {
                    for statement in step.statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                    try await connection.query(
                        "INSERT INTO rc_relay_schema (version, description) VALUES (\(step.version), \(step.description))", logger: logger)
                    now.append(step.version)
                }
                return now
            }
        }
    }

    /// The key of the advisory lock migrations hold (any constant the relay alone uses).
    static let migrationLock: Int64 = 0x7263_7265_6C61_79

    // MARK: - Health

    /// One round trip, for readiness.
    package func check() async throws(StoreError) {
        try await run("check") { client, logger in try await client.query("SELECT 1", logger: logger) }
    }

    // MARK: - Running statements

    /// Runs `body` within the statement timeout, turning the driver's errors into ``StoreError``s.
    ///
    /// The caller has its answer by the timeout whatever the database does: postgres-nio does not abandon a query
    /// under way when its task is cancelled, so `body` runs in a task of its own, which is cancelled and left to end
    /// (the server ends the statement itself: `statement_timeout` and `lock_timeout` are set per connection).
    @discardableResult
    func run<Result: Sendable>(
        _ what: String, within limit: Duration? = nil, _ body: @escaping @Sendable (PostgresClient, Logger) async throws -> Result
    ) async throws(StoreError) -> Result {
        let limit = limit ?? settings.statementTimeout
        let started = ContinuousClock.now
        let answer = Settlement<Swift.Result<Result, StoreError>>()
        let work = Task { [client, logger] in
            do {
                answer.settle(.success(try await body(client, logger)))
            } catch {
                answer.settle(.failure(Self.storeError(error)))
            }
        }
        // The bounded wait is a callback on the clock's shared sweep, not a timer task per statement.
        let outcome = await answer.value(within: limit, on: clock) ?? .failure(.unavailable("no answer within \(limit)"))
        work.cancel()
        observe(what, ContinuousClock.now - started, { if case .failure = outcome { true } else { false } }())
        switch outcome {
        case .success(let value): return value
        case .failure(let error):
            logger.debug("store statement failed", metadata: ["statement": "\(what)", "error": "\(error)"])
            throw error
        }
    }

    static func storeError(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        if let transaction = error as? PostgresTransactionError {
            // What went wrong inside: the closure's error, else BEGIN's or COMMIT's.
            let cause: (any Error)? = transaction.closureError ?? transaction.beginError ?? transaction.commitError
            return cause.map(storeError) ?? .failed("the transaction failed")
        }
        if error is CancellationError { return .unavailable("cancelled") }
        guard let error = error as? PSQLError else { return .failed("\(error)") }
        if let server = error.serverInfo {
            // The server's own words: SQLSTATE and message (they name tables, never values or passwords).
            return .failed("\(server[.sqlState] ?? "?") \(server[.message] ?? "")")
        }
        return .unavailable("\(error.code)")
    }
}
