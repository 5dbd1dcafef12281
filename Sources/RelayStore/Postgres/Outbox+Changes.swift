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
        var copies = HistoryCopies()
        for await _ in outbox.wakes {
            await apply(outbox.take(), copies: &copies)
            await writeHeldMarks(all: false)
            // A copy held for its event's settlement waits ``holdCopies`` at most: a round then writes it.
            if !copies.held.entries.isEmpty { _ = clock.schedule(after: Self.holdCopies) { [outbox] in outbox.poke() } }
        }
        copies.holding = false
        await apply(outbox.take(), copies: &copies)  // queued before the end
        await writeHeldMarks(all: true)
    }

    /// How long a ping's history copy may wait for its event's settlement to ride it.
    static let holdCopies = Duration.milliseconds(50)

    func apply(_ changes: [OutboxSpool.Change], copies: inout HistoryCopies) async {
        var settlements: [Settling] = []
        // What was held before comes first: it is older.
        var entries = copies.held
        copies.held = JournalBatch()
        let moot = OutboxSpool.mootUpdates(changes)
        for (index, change) in changes.enumerated() where !moot.contains(index) {
            switch change {
            case .settle(let record, let reports):
                settlements.append(Settling(record: record, reports: reports))
                continue
            case .journal(let entry):
                entries.add(entry)
                continue
            case .flush, .update: break
            }
            await settleAll(settlements, entries: &entries, copies: &copies)
            settlements = []
            switch change {
            // Whether every change since the last flush was written, in this round or an earlier one (one given up
            // means the stop leaves its leases to expire rather than hand over what the database does not have).
            case .flush(let waiter):
                // What a flush waits for includes the history: nothing is held past it.
                await journalAll(entries, copies: &copies)
                entries = JournalBatch()
                await writeHeldMarks(all: true)
                waiter.settle(
                    !givenUp.withLockedValue { given in
                        defer { given = false }
                        return given
                    })
            case .update(let record): await applying("update") { () throws(StoreError) in try await self.update(record) }
            case .settle, .journal: break
            }
        }
        await settleAll(settlements, entries: &entries, copies: &copies)
        // A copy of a ping whose event has a row waits up to ``holdCopies`` since it was first held for the event's
        // settlement (its pending copy then is never written, its settled one rides the settlement); the others, and
        // those that waited that long, are written now. Rounds come far more often than that under load: a copy that
        // waited one round only was written apart for one ping in ten (docs/performance.md, 2026-12-05).
        var now = JournalBatch()
        let instant = clock.instant()
        var since: [String: Duration] = [:]
        for entry in entries.entries {
            let first = copies.heldSince[entry.id] ?? instant
            if copies.holding, instant - first < Self.holdCopies, DeliveryHistory.row(ofPing: entry.id) != nil {
                copies.held.add(entry)
                since[entry.id] = first
            } else {
                now.add(entry)
            }
        }
        copies.heldSince = since
        await journalAll(now, copies: &copies)
    }

    /// Settles the events in one statement, each with the settled history copies of its pings that are in `entries`
    /// (taken out of them); if the database refuses the statement, one by one (so only the refused one is lost).
    func settleAll(_ settlements: [Settling], entries: inout JournalBatch, copies: inout HistoryCopies) async {
        guard !settlements.isEmpty else { return }
        var settlements = settlements
        var rows: [Int64: Int] = [:]
        for (index, settling) in settlements.enumerated() {
            if let row = settling.record.storeRow { rows[row] = index }
        }
        entries.remove { entry in
            guard entry.report != nil, let row = DeliveryHistory.row(ofPing: entry.id), let index = rows[row] else { return false }
            settlements[index].pings.append(entry)
            if copies.written.remove(entry.id) != nil { settlements[index].written.append(entry.id) }
            return true
        }
        var unsettled: [Settling]
        do {
            unsettled = try await settle(settlements, paced: true)
        } catch {
            // Refused as a whole: one by one, so only the refused one is lost; the database away: all again.
            var parts = settlements.map { [$0] }
            if case .unavailable = error { parts = [settlements] }
            unsettled = []
            for part in parts { unsettled += await settling(part) }
        }
        // An event settled already (by another replica, or before a take-over), or whose settlement was given up: its
        // pings' copies go apart.
        for settling in unsettled {
            for entry in settling.pings { entries.add(entry) }
            for id in settling.written { copies.written.insert(id) }
        }
    }

    /// Settles `batch` once the database takes it (``applying(_:_:)``); returns what it did not settle (all of it when
    /// the settlement was given up).
    func settling(_ batch: [Settling]) async -> [Settling] {
        var left = batch
        await applying("settle") { () throws(StoreError) in left = try await self.settle(batch, paced: true) }
        return left
    }

    /// An event to settle, with its reports and the settled history copies of its pings that ride the settlement (and
    /// the ids of those whose earlier copies are in `rc_relay_pings`, deleted in the same statement).
    struct Settling: Sendable {
        var record: EventRecord
        var reports: [DeliveryReport]
        var pings: [DeliveryHistory.Entry] = []
        var written: [String] = []
    }

    /// Settles several events in one statement, each by its row (a HOT update: no index reads what it changes), with
    /// the history copies of their pings. Returns the ones it did not settle (settled already). `paced`: a project's
    /// mark is written at most once per ``MarksPace/interval`` (the writer of the changes writes the ones held); else
    /// with every settlement.
    @discardableResult
    func settle(_ settlements: [Settling], paced: Bool = false) async throws(StoreError) -> [Settling] {
        let now = clock.instant()
        let moving = Set(settlements.filter { $0.record.outlier != true }.map(\.record.project))
        let held = paced ? marksPace.withLockedValue { pace in moving.filter { !pace.writesNow($0, at: now) } } : []
        var ids: [Int64] = []
        var keys: [String] = []
        var reports: [String] = []
        var marks: [Bool] = []
        var pings: [String] = []
        var written: [String] = []
        for settling in settlements {
            ids.append(settling.record.storeRow ?? 0)
            keys.append(settling.record.keys.first ?? "")
            reports.append(DeliveryReport.jsonText(settling.reports))
            marks.append(settling.record.outlier != true && !held.contains(settling.record.project))
            let copies = settling.pings.map { $0.jsonText(beside: settling.reports, eventID: settling.record.eventID) }
            pings.append(copies.isEmpty ? "" : "[" + copies.joined(separator: ",") + "]")
            written.append(settling.written.joined(separator: " "))
        }
        let query = Self.settlement(
            ids: ids, keys: keys, reports: reports, marks: marks, pings: pings, written: written,
            unmarked: moving.subtracting(held).subtracting(marked.withLockedValue { $0 }))
        let settled = try await run("settle") { client, logger in
            let rows = try await client.query(query, logger: logger)
            var items: Set<Int> = []
            for try await item in rows.decode(Int.self) { items.insert(item) }
            return items
        }
        // The rows of marks of the projects whose marks advanced exist now (none is ever deleted): later settlements need not add them.
        let advanced = settlements.enumerated().filter { settled.contains($0.offset + 1) && marks[$0.offset] }.map(\.element.record.project)
        marked.withLockedValue { $0.formUnion(advanced) }
        if paced {
            marksPace.withLockedValue { pace in
                for project in advanced { pace.wrote(project, at: now) }
                for (offset, settling) in settlements.enumerated()
                where settled.contains(offset + 1) && settling.record.outlier != true && held.contains(settling.record.project) {
                    pace.hold(settling.record.project, settling.record.version.versionNumber)
                }
            }
        }
        return settlements.enumerated().filter { !settled.contains($0.offset + 1) }.map(\.element)
    }

    /// Writes the marks held (``MarksPace``) that are due, or all of them (a flush, the end), in one statement, and asks
    /// to be woken when the next falls due.
    func writeHeldMarks(all: Bool) async {
        let now = clock.instant()
        let due = marksPace.withLockedValue { $0.takeDue(at: now, all: all) }
        if !due.isEmpty { await applying("marks") { () throws(StoreError) in try await self.noteRelayed(due) } }
        if let wake = marksPace.withLockedValue({ $0.wake(after: now) }) {
            _ = clock.schedule(after: wake) { [outbox, marksPace] in
                marksPace.withLockedValue { $0.woke() }
                outbox.poke()
            }
        }
    }

    /// Writes the history copies in one statement; if the database refuses it, they are logged and dropped (the
    /// history is for reading: it never holds up the outbox). Notes the pending copies written, whose rows a
    /// settlement that carries their settled copies deletes.
    func journalAll(_ batch: JournalBatch, copies: inout HistoryCopies) async {
        guard !batch.entries.isEmpty else { return }
        await applying("journal") { () throws(StoreError) in try await self.journal(batch.entries) }
        for entry in batch.entries where DeliveryHistory.row(ofPing: entry.id) != nil {
            if entry.report == nil { copies.noteWritten(entry.id) } else { copies.written.remove(entry.id) }
        }
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
