import Foundation
import NIOConcurrencyHelpers

/// The deliveries under way and those settled recently, by their keys (event ids, project and version).
///
/// A duplicate joins the delivery under way, or gets the answer of one settled in the last `window`; an event that
/// claims an id of another event is a conflict, not a duplicate. Deliveries run on after the webhook is answered.
///
/// Durability: an event on disk (answered 202, or replayed from the spool) stays there until each of its pings is
/// accepted, refused for good, or discarded by an operator: when retries run out it is tried again every
/// `parkedRetryInterval`. At shutdown, ``drain(within:)`` hands each unfinished delivery over exactly: it is stopped
/// (no new attempt starts; one under way finishes), and only then is what is still due written to the spool.
///
/// State behind a lock, not an actor: every webhook looks up, starts and finishes a delivery here, and the actor hops
/// (contended under load) cost more than the dictionary work they guarded. Nothing awaits and no file is touched while
/// holding it: each delivery's spooled record is written and removed under that delivery's own lock.
package final class RecentEvents: Sendable {
    /// What a caller learns within its wait.
    package enum Outcome: Sendable {
        case settled([DeliveryReport], duplicate: Bool)
        /// Not settled within the wait, or a ping waits to retry (`retryAfter`): answered 202 once spooled, else 503.
        case pending(EventDelivery, retryAfter: Duration?)
        /// One of the event's ids belongs to another event (another project or version).
        case conflict(key: String)
        /// `maxInFlight` deliveries are under way already.
        case saturated
        /// The engine is stopping: it starts nothing new.
        case stopping
    }

    /// What spooling a pending delivery for its 202 came to.
    package enum Acknowledgement: Sendable {
        case spooled
        /// It settled first: answer with the outcome instead.
        case settled([DeliveryReport])
    }

    /// The first news a waiting sender can be answered with.
    enum News: Sendable {
        case settled([DeliveryReport])
        case retrying(after: Duration)
        case handedOver
    }

    /// How a delivery ended at shutdown.
    package enum HandOver: Sendable {
        case settled
        case spooled(EventRecord)
        case lost(EventRecord)
    }

    /// One event's delivery under way.
    package final class EventDelivery: Sendable {
        package let record: EventRecord
        let control: DeliveryControl
        /// The first news for waiting senders: settled, or a retry under way (the outcome is known to be "later").
        let news: Settlement<News>
        let reports = Settlement<[DeliveryReport]>()
        let disk: NIOLockedValueBox<Disk>

        struct Disk {
            /// It is spooled: the event was acknowledged, so it must not be lost.
            var onDisk: Bool
            var settled: [DeliveryReport]?
            var handOver: HandOver?
            /// Its retries ran out and it waits to be tried again: nothing to wait for at shutdown.
            var parked = false
            /// Pings accepted while others were due (`EventRecord.done`: waved shards, and the event's other routes),
            /// kept in the spool from the acknowledgement on.
            var done: [String]
        }

        init(record: EventRecord, onDisk: Bool, clock: any DeliveryClock, spool: (any Spool)?) {
            let news = Settlement<News>()
            let disk = NIOLockedValueBox(Disk(onDisk: onDisk, done: record.done ?? []))
            self.record = record
            self.news = news
            self.disk = disk
            self.control = DeliveryControl(
                clock: clock, onRetry: { news.settle(.retrying(after: $0)) },
                onAccepted: { shard in
                    // Under the delivery's own lock, as the acknowledgement's write is: the file always says what a
                    // crash would otherwise send again. A failed write leaves the older file, which over-sends.
                    disk.withLockedValue { disk in
                        disk.done.append(shard)
                        guard disk.onDisk, disk.settled == nil, let spool else { return }
                        var progressed = record
                        progressed.done = disk.done
                        try? spool.write(progressed)
                    }
                })
        }

        /// The record as the spool should hold it now.
        func current(_ disk: Disk) -> EventRecord {
            var record = record
            record.done = disk.done.isEmpty ? nil : disk.done
            return record
        }

        /// Whether the event is spooled (it was acknowledged).
        var isOnDisk: Bool { disk.withLockedValue { $0.onDisk } }
        var isParked: Bool { disk.withLockedValue { $0.parked } }
    }

    /// The delivery's work: the routes still due (nil: all), steered by its control.
    typealias Work = @Sendable (_ routes: Set<String>?, _ control: DeliveryControl) async -> [DeliveryReport]

    struct Remembered {
        var fingerprint: String
        var reports: [DeliveryReport]
        var at: Date
    }

    struct State {
        var inFlight: [String: EventDelivery] = [:]
        var inFlightCount = 0
        var parked = 0
        var done: [String: Remembered] = [:]
        /// Events oldest first from `head` on; the forgotten prefix is dropped in one go once it is half the array, so
        /// forgetting is O(1) (an array's `removeFirst` moves every entry, on every event once the window is full).
        var order: [(keys: [String], at: Date)] = []
        var head = 0
    }

    let window: TimeInterval
    /// Settled events remembered at most (events, not keys).
    let capacity: Int
    /// Deliveries under way at most; more are refused with 503 until some settle.
    let maxInFlight: Int
    /// How long an acknowledged event whose retries ran out waits before it is tried again.
    let parkedRetryInterval: Duration
    let spool: (any Spool)?
    /// What the dedup window, the waits and the drain are measured on (a test's own, in tests).
    let clock: any DeliveryClock
    /// Where deliveries run.
    let tasks: DeliveryTasks
    /// Told the number of parked events whenever it changes (under the lock, so a gauge never keeps an older value).
    let parkedChanged: @Sendable (Int) -> Void
    let state = NIOLockedValueBox(State())

    init(
        window: Duration = .seconds(600), capacity: Int = 10_000, maxInFlight: Int = 10_000,
        parkedRetryInterval: Duration = .seconds(300), spool: (any Spool)? = nil, clock: any DeliveryClock, tasks: DeliveryTasks,
        parkedChanged: @escaping @Sendable (Int) -> Void = { _ in }
    ) {
        self.parkedChanged = parkedChanged
        self.clock = clock
        self.tasks = tasks
        self.window = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
        self.capacity = capacity
        self.maxInFlight = max(1, maxInFlight)
        self.parkedRetryInterval = parkedRetryInterval
        self.spool = spool
        // Room for three keys per remembered event at a low load: a removal from a crowded table moves (and hashes
        // again) every key after it in its run, which was half of what settling an event cost (issue #35's profile).
        // Up to the default's 1,000 events (about 400 KB); a larger memory grows its table as it fills.
        state.withLockedValue { $0.done.reserveCapacity(min(capacity, 1000) * 6) }
    }

    /// Acknowledged events whose pings have not been accepted yet, waiting to be tried again.
    var parked: Int { state.withLockedValue { $0.parked } }
    /// Events whose delivery is under way.
    var inFlight: Int { state.withLockedValue { $0.inFlightCount } }

    /// Whether the event is under way here, or settled within the window.
    func knows(_ record: EventRecord) -> Bool {
        state.withLockedValue { state in record.keys.contains { state.inFlight[$0] != nil || state.done[$0] != nil } }
    }

    /// Starts the delivery (or joins the one under way) and waits up to `wait` for its first news (a joiner: for its
    /// outcome). `onDisk`: the record comes from the spool, so it is acknowledged already.
    func deliver(_ record: EventRecord, wait: Duration, onDisk: Bool = false, _ work: @escaping Work) async -> Outcome {
        enum Found {
            case done([DeliveryReport])
            case running(EventDelivery)
            case started(EventDelivery)
            case conflict(String)
            case saturated
        }
        let now = clock.now()
        let fingerprint = record.fingerprint
        // Made before the lock that every request and worker takes, not under it (a dozen allocations); a duplicate
        // drops it unused.
        let candidate = EventDelivery(record: record, onDisk: onDisk, clock: clock, spool: spool)
        let found = state.withLockedValue { state -> Found in
            forgetExpired(&state, now: now)
            for key in record.keys {
                guard let previous = state.done[key] else { continue }
                return previous.fingerprint == fingerprint ? .done(previous.reports) : .conflict(key)
            }
            for key in record.keys {
                guard let running = state.inFlight[key] else { continue }
                return running.record.fingerprint == fingerprint ? .running(running) : .conflict(key)
            }
            guard state.inFlightCount < maxInFlight else { return .saturated }
            for key in record.keys { state.inFlight[key] = candidate }
            state.inFlightCount += 1
            return .started(candidate)
        }
        let delivery: EventDelivery
        let duplicate: Bool
        switch found {
        case .done(let reports): return .settled(reports, duplicate: true)
        case .conflict(let key): return .conflict(key: key)
        case .saturated: return .saturated
        case .running(let running): (delivery, duplicate) = (running, true)
        case .started(let started):
            (delivery, duplicate) = (started, false)
            // It outlives the request that started it: it runs in the engine's task group, and `drain` hands it over.
            guard tasks.add({ await self.run(started, work) }) else {
                forget(started)
                return .stopping
            }
        }
        // The first sender is answered at the first news (a retry under way means "later"); a sender's retry that
        // joins waits for the outcome itself, which may be moments away, within the same bound.
        if duplicate {
            guard let reports = await delivery.reports.value(within: wait, on: clock) else { return .pending(delivery, retryAfter: nil) }
            return .settled(reports, duplicate: true)
        }
        switch await delivery.news.value(within: wait, on: clock) {
        case .settled(let reports)?: return .settled(reports, duplicate: false)
        case .retrying(let after)?: return .pending(delivery, retryAfter: after)
        case .handedOver?, nil: return .pending(delivery, retryAfter: nil)
        }
    }

    /// Writes a pending delivery to the spool before the sender is told 202. If it settled first, says so instead (a
    /// 202 is never answered with nothing on disk).
    func acknowledge(_ delivery: EventDelivery) throws -> Acknowledgement {
        guard let spool else { throw SpoolError.cannotWrite("the event (no spool is configured)") }
        return try delivery.disk.withLockedValue { disk in
            if disk.onDisk { return .spooled }
            if let settled = disk.settled { return .settled(settled) }
            try spool.write(delivery.current(disk))
            disk.onDisk = true
            return .spooled
        }
    }

    /// Stops the deliveries of the project's events (another replica delivers them now): no new attempt starts, and
    /// each hands what is still due back to the spool. Returns how many were stopped.
    func standDown(project: String) -> Int {
        let running = state.withLockedValue { state in
            var unique: [ObjectIdentifier: EventDelivery] = [:]
            for delivery in state.inFlight.values where delivery.record.project == project { unique[ObjectIdentifier(delivery)] = delivery }
            return Array(unique.values)
        }
        for delivery in running { delivery.control.stop() }
        return running.count
    }

    /// Discards the route's ping of the acknowledged event waiting under `key`: it is not tried again, and once no
    /// route is due it leaves the spool. False when no such event waits.
    func discard(key: String, route: String) -> Bool {
        guard let delivery = state.withLockedValue({ $0.inFlight[key] }), delivery.isOnDisk else { return false }
        delivery.control.discard(route)
        return true
    }

    /// On stop: waits up to `grace` for deliveries under way, then stops the rest and waits for each to hand over (an
    /// attempt under way finishes first, within the sender's timeout). Returns how each delivery ended.
    func drain(within grace: Duration, handOverWithin limit: Duration = .seconds(30)) async -> [HandOver] {
        let running = state.withLockedValue { state in
            var unique: [ObjectIdentifier: EventDelivery] = [:]
            for delivery in state.inFlight.values { unique[ObjectIdentifier(delivery)] = delivery }
            return Array(unique.values)
        }
        let deadline = clock.instant() + grace
        for delivery in running where !delivery.isParked {
            _ = await delivery.reports.value(within: deadline - clock.instant(), on: clock)
        }
        for delivery in running { delivery.control.stop() }
        var ended: [HandOver] = []
        for delivery in running {
            _ = await delivery.reports.value(within: limit, on: clock)
            ended.append(delivery.disk.withLockedValue { $0.handOver } ?? .lost(delivery.record))
        }
        return ended
    }
}
