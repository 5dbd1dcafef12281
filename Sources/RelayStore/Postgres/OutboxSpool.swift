import DeliveryEngine
import NIOConcurrencyHelpers

/// The delivery engine's spool and history journal, on the store: an event is in the outbox from the moment it is admitted (before any
/// answer), so the engine's writes here are progress (shards accepted, routes still due at a stop) and settlements.
///
/// The engine calls a spool synchronously, under a delivery's lock; these calls only queue the change, and
/// ``PostgresStore/run()`` applies them in order (settlements in batches), retrying while the database is away. A change not applied before a
/// crash leaves the row as it was, which sends again what it would have recorded as done: never fewer pings.
package final class OutboxSpool: Spool, DeliveryJournal {
    enum Change: Sendable {
        case update(EventRecord)
        case settle(EventRecord, [DeliveryReport])
        /// Settled once every change before it is applied (a waiter that gives up first is taken out of the queue).
        case flush(Settlement<Bool>)
        /// A delivery history entry, copied for the other replicas' admin API.
        case journal(DeliveryHistory.Entry)
    }

    /// History copies waiting at most (the database is away): more are dropped, since the history is for reading and
    /// must not grow the queue without bound. Events and settlements are never dropped.
    static let journalLimit = 10_000

    private struct Queue {
        var changes: [Change] = []
        var journalEntries = 0
        var stopping = false
        var finished = false
    }

    private let queue = NIOLockedValueBox(Queue())
    private let wake: AsyncStream<Void>.Continuation
    /// Yields when changes are queued (at most one wake-up waits: the consumer takes everything queued at once).
    let wakes: AsyncStream<Void>

    init() {
        (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func enqueue(_ change: Change) -> Bool {
        let queued = queue.withLockedValue { queue in
            guard !queue.finished else { return false }
            if case .journal = change {
                guard queue.journalEntries < Self.journalLimit else { return false }
                queue.journalEntries += 1
            }
            queue.changes.append(change)
            return true
        }
        if queued { wake.yield() }
        return queued
    }

    /// Wakes the consumer with nothing queued (it writes the history copies it held).
    func poke() { wake.yield() }

    /// Everything queued so far, oldest first.
    func take() -> [Change] {
        queue.withLockedValue { queue in
            defer {
                queue.changes = []
                queue.journalEntries = 0
            }
            return queue.changes
        }
    }

    package func write(_ record: EventRecord) throws { _ = enqueue(.update(record)) }
    package func remove(_ record: EventRecord) { _ = enqueue(.settle(record, [])) }
    package func settle(_ record: EventRecord, reports: [DeliveryReport]) { _ = enqueue(.settle(record, reports)) }
    /// Copies a history entry to the store (see ``DeliveryJournal``).
    package func record(_ entry: DeliveryHistory.Entry) { _ = enqueue(.journal(entry)) }
    /// Nothing to recover at start: a replica delivers a project's outbox once it holds the project's lease.
    package func recover() -> SpoolRecovery { SpoolRecovery() }

    /// The updates in `changes` that a settlement of the same event later in them makes moot: the settlement overwrites
    /// the record, so the update would only cost a statement (and a row version) of its own, and split the round's
    /// settlements in two. An event whose one route FCM accepts records that progress and settles in the same moment,
    /// so with `store.postgres` nearly every webhook had such an update. A flush between the two keeps the update: what
    /// a stop waits for must be written.
    static func mootUpdates(_ changes: [Change]) -> Set<Int> {
        var settledAfter: Set<String> = []
        var moot: Set<Int> = []
        for (index, change) in changes.enumerated().reversed() {
            switch change {
            case .settle(let record, _): settledAfter.insert(record.keys.first ?? "")
            case .update(let record): if settledAfter.contains(record.keys.first ?? "") { moot.insert(index) }
            case .flush: settledAfter = []
            case .journal: continue
            }
        }
        return moot
    }

    /// Takes a waiter that gave up out of the queue, so reads during an outage leave nothing behind.
    func forget(_ waiter: Settlement<Bool>) {
        queue.withLockedValue { queue in
            queue.changes.removeAll { change in
                if case .flush(let queued) = change { return queued === waiter }
                return false
            }
        }
    }

    /// Flush waiters in the queue (for tests: none is left behind by a wait that gave up).
    var waiters: Int {
        queue.withLockedValue { queue in
            queue.changes.count { change in
                if case .flush = change { return true }
                return false
            }
        }
    }

    /// The relay is stopping: a change the database does not take within a few tries is given up.
    func stopping() { queue.withLockedValue { $0.stopping = true } }

    /// No change comes any more: the consumer applies what is queued and ends.
    func finish() {
        queue.withLockedValue {
            $0.stopping = true
            $0.finished = true
        }
        wake.finish()
    }

    var isStopping: Bool { queue.withLockedValue { $0.stopping } }
}
