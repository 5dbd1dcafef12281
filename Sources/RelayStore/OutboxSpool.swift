import DeliveryEngine
import Synchronization

/// The delivery engine's spool, on the store: an event is in the outbox from the moment it is admitted (before any
/// answer), so the engine's writes here are progress (shards accepted, routes still due at a stop) and settlements.
///
/// The engine calls a spool synchronously, under a delivery's lock; these calls only queue the change, and
/// ``PostgresStore/run()`` applies them in order, retrying while the database is away. A change not applied before a
/// crash leaves the row as it was, which sends again what it would have recorded as done: never fewer pings.
package final class OutboxSpool: Spool {
    enum Change: Sendable {
        case update(SpoolRecord)
        case settle(SpoolRecord, [DeliveryReport])
        /// Resumed once every change before it is applied.
        case flush(CheckedContinuation<Void, Never>)
    }

    private let continuation: AsyncStream<Change>.Continuation
    private let finished = Mutex(false)

    private init(_ continuation: AsyncStream<Change>.Continuation) { self.continuation = continuation }

    static func make() -> (AsyncStream<Change>, OutboxSpool) {
        let (stream, continuation) = AsyncStream.makeStream(of: Change.self)
        return (stream, OutboxSpool(continuation))
    }

    package func write(_ record: SpoolRecord) throws { continuation.yield(.update(record)) }
    package func remove(_ record: SpoolRecord) { continuation.yield(.settle(record, [])) }
    package func settle(_ record: SpoolRecord, reports: [DeliveryReport]) { continuation.yield(.settle(record, reports)) }
    /// Nothing to recover at start: a replica delivers a project's outbox once it holds the project's lease.
    package func recover() -> SpoolRecovery { SpoolRecovery() }

    /// Returns once every change queued before the call is applied (or given up at a stop).
    func flush() async {
        await withCheckedContinuation { waiter in
            if case .terminated = continuation.yield(.flush(waiter)) { waiter.resume() }
        }
    }

    /// The relay is stopping: a change the database does not take within a few tries is given up.
    func stopping() { finished.withLock { $0 = true } }

    func finish() {
        stopping()
        continuation.finish()
    }

    var isStopping: Bool { finished.withLock { $0 } }
}
