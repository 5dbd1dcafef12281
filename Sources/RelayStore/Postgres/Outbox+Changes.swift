import DeliveryEngine
import Foundation
import Logging
import PostgresNIO

/// The engine's changes to the outbox (updates, settlements, the history's copies), applied in order, in rounds, and
/// retried while the database is away; flushed before a stop.
extension PostgresStore {
    /// Returns once the engine's changes queued so far are applied.
    package func flush() async {
        while await !flush(within: .seconds(60)) {}
    }

    /// At a stop: returns once the engine's changes queued so far are applied, or after `limit` (the database is away:
    /// the changes not applied are given up, which sends again at worst). True when all were applied.
    package func flushBeforeStop(within limit: Duration) async -> Bool {
        outbox.stopping()
        return await flush(within: limit)
    }

    /// Returns once the engine's changes queued so far are applied, or after `limit`. True when all were applied. A
    /// wait that gives up takes its waiter out of the queue.
    package func flush(within limit: Duration) async -> Bool {
        let done = Settlement<Bool>()
        guard outbox.enqueue(.flush(done)) else { return true }
        if let applied = await done.value(within: limit, on: clock) { return applied }
        outbox.forget(done)
        return false
    }

    /// Applies the engine's changes in order, consecutive settlements in one statement; a change the database does not
    /// take is retried until it is applied or the relay is stopping (then it is logged: the row keeps its older state).
    func applyChanges() async {
        for await _ in outbox.wakes { await apply(outbox.take()) }
        await apply(outbox.take())  // queued before the end
    }

    func apply(_ changes: [OutboxSpool.Change]) async {
        var settlements: [(EventRecord, [DeliveryReport])] = []
        var entries = JournalBatch()
        let moot = OutboxSpool.mootUpdates(changes)
        for (index, change) in changes.enumerated() where !moot.contains(index) {
            switch change {
            case .settle(let record, let reports):
                settlements.append((record, reports))
                continue
            case .journal(let entry):
                entries.add(entry)
                continue
            case .flush, .update: break
            }
            await settleAll(settlements)
            settlements = []
            await journalAll(entries)
            entries = JournalBatch()
            switch change {
            // Whether every change since the last flush was written, in this round or an earlier one (one given up
            // means the stop leaves its leases to expire rather than hand over what the database does not have).
            case .flush(let waiter):
                waiter.settle(
                    !givenUp.withLockedValue { given in
                        defer { given = false }
                        return given
                    })
            case .update(let record): await applying("update") { () throws(StoreError) in try await self.update(record) }
            case .settle, .journal: break
            }
        }
        await settleAll(settlements)
        await journalAll(entries)
    }

    /// Settles the events in one statement; if the database refuses it, one by one (so only the refused one is lost).
    func settleAll(_ settlements: [(EventRecord, [DeliveryReport])]) async {
        guard !settlements.isEmpty else { return }
        if settlements.count > 1 {
            do {
                try await settle(settlements)
                return
            } catch {
                if case .unavailable = error {
                    await applying("settle") { () throws(StoreError) in try await self.settle(settlements) }
                    return
                }
            }
        }
        for (record, reports) in settlements {
            await applying("settle") { () throws(StoreError) in try await self.settle(record, reports: reports) }
        }
    }

    /// Settles several events in one statement, each by its row (a HOT update: no index reads what it changes).
    func settle(_ settlements: [(EventRecord, [DeliveryReport])]) async throws(StoreError) {
        var ids: [Int64] = []
        var keys: [String] = []
        var reports: [String] = []
        var marks: [Bool] = []
        for (record, settled) in settlements {
            ids.append(record.storeRow ?? 0)
            keys.append(record.keys.first ?? "")
            reports.append(DeliveryReport.jsonText(settled))
            marks.append(record.outlier != true)
        }
        let (batchIDs, batchKeys, batchReports, batchMarks) = (ids, keys, reports, marks)
        // The project's newest version relayed advances with the settlement, whoever delivered it (an outlier moves
        // nothing). A record without its row (none should be) is found by its version key.
        try await run("settle") { client, logger in
            try await client.query(
                """
                WITH v AS (
                    SELECT coalesce(nullif(v.id, 0), (SELECT id FROM rc_relay_outbox WHERE key_version = rc_relay_key(v.key))) AS id,
                        v.reports, v.marks
                    FROM unnest(\(batchIDs)::bigint[], \(batchKeys)::text[], \(batchReports)::text[], \(batchMarks)::boolean[])
                        AS v(id, key, reports, marks)),
                settled AS (
                    UPDATE rc_relay_outbox o SET settled = true, settled_at = now(), reports = v.reports, record = NULL
                    FROM v WHERE o.id = v.id AND NOT o.settled
                    RETURNING o.project, o.version, v.marks)
                INSERT INTO rc_relay_marks (project, relayed) SELECT project, max(version) FROM settled WHERE marks GROUP BY project
                ON CONFLICT (project) DO UPDATE SET relayed = EXCLUDED.relayed, updated_at = now()
                WHERE rc_relay_marks.relayed IS NULL OR rc_relay_marks.relayed < EXCLUDED.relayed
                """, logger: logger)
        }
    }

    /// Writes the history copies in one statement; if the database refuses it, they are logged and dropped (the
    /// history is for reading: it never holds up the outbox).
    func journalAll(_ batch: JournalBatch) async {
        guard !batch.entries.isEmpty else { return }
        await applying("journal") { () throws(StoreError) in try await self.journal(batch.entries) }
    }

    /// Runs one change until the database takes it, refuses it for good, or the relay stops while it is away; one not
    /// written is noted for the next flush (``givenUp``).
    func applying(_ what: String, _ change: () async throws(StoreError) -> Void) async {
        var delay = Duration.milliseconds(100)
        var attempts = 0
        while true {
            attempts += 1
            do {
                try await change()
                return
            } catch {
                if case .failed = error {
                    // The database refused it (not a lost connection): trying again cannot help, and every later
                    // change would wait behind it. The row keeps its older state, which sends again at worst.
                    logger.error(
                        "outbox change refused by PostgreSQL: the event will be delivered again",
                        metadata: ["change": "\(what)", "error": "\(error)"])
                    givenUp.withLockedValue { $0 = true }
                    return
                }
                logger.warning("outbox change not applied yet; retrying", metadata: ["change": "\(what)", "error": "\(error)"])
                // Stopping: a few tries (about 3 s), then it is given up and the stop goes on.
                if outbox.isStopping, attempts >= 6 {
                    logger.error("outbox change not applied before the stop: the event will be delivered again", metadata: ["error": "\(error)"])
                    givenUp.withLockedValue { $0 = true }
                    return
                }
                try? await Task.sleep(for: delay)
                // At most a quarter of the lease apart: once the database is back, this replica's progress (a hand-over
                // at a stand-down above all) is written before another replica's renewal can take its lease and read
                // the outbox.
                delay = min(delay * 2, .seconds(5), settings.lease / 4)
            }
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
