import Foundation
import NIOConcurrencyHelpers
import RelayCore

/// The last `capacity` pings with their history, for the admin API: what the relay sent, is sending, and gave up on.
///
/// Each ping is an entry from the moment it is routed (`pending`) until it settles; a dead ping keeps its attempts,
/// statuses, the destination's error codes and times here until newer pings push it out.
///
/// State behind a lock, not an actor: every ping starts and settles an entry, and two actor hops per ping measured
/// more than the few dictionary operations they guard.
package final class DeliveryHistory: Sendable {
    /// What started a ping.
    package enum Origin: String, Sendable, Codable {
        case webhook, spool, send, retry, poll
    }

    package struct Entry: Sendable, Codable, Equatable {
        package var id: String
        package var project: String
        package var route: String
        package var version: TemplateVersion
        package var eventID: String?
        package var origin: Origin
        package var retryOf: String?
        package var toDevice: Bool
        package var validateOnly: Bool
        package var receivedAt: Date
        package var settledAt: Date?
        /// Nil while pending.
        package var report: DeliveryReport?
        /// Why a change-aware route fired to this audience.
        package var decision: String? = nil
        /// The topic or condition the ping went to (a change-aware route may narrow its audience); nil for a device,
        /// whose token is not kept.
        package var audience: PingAudience? = nil
        /// A pending ping waiting for its turn: until when, and what for (its route's quiet period, or its shard's
        /// turn in a wave).
        package var waitingUntil: Date? = nil
        package var waitingFor: String? = nil
        /// Its shard in its route's wave, and the wave's shards.
        package var shard: PingSchedule.Shard? = nil
        /// The trace the ping's spans are in (32 hex digits), when tracing is on.
        package var traceID: String? = nil
        /// The event's version is an outlier (docs/webhook.md): relayed, but saying nothing of what the project's
        /// devices were told last. Nil (absent in the JSON) when it is not.
        package var outlier: Bool? = nil
        /// The replica that sent it (``EngineSettings/replica``): with several replicas, which one made its requests.
        package var replica: String? = nil
        /// A change-aware route's ping to part of its audience: the topics it reaches, sorted (``Ping/narrowedTopics``);
        /// nil for a route's whole audience. A replica that takes the project over reads it back: a newer version's
        /// ping to the whole audience, or to a condition naming these topics, makes an older one here stale.
        package var narrowed: [String]? = nil

        package init(
            id: String, project: String, route: String, version: TemplateVersion, eventID: String?, origin: Origin, retryOf: String?,
            toDevice: Bool, validateOnly: Bool, receivedAt: Date, settledAt: Date?, report: DeliveryReport?
        ) {
            (self.id, self.project, self.route, self.version, self.eventID, self.origin) = (id, project, route, version, eventID, origin)
            (self.retryOf, self.toDevice, self.validateOnly, self.receivedAt, self.settledAt, self.report) =
                (retryOf, toDevice, validateOnly, receivedAt, settledAt, report)
        }
    }

    /// What a list asks for; nil fields match everything.
    package struct Filter: Sendable {
        package var status: String?
        package var route: String?
        package var project: String?
        package var version: Int64?
        package var limit = 100

        package init(status: String? = nil, route: String? = nil, project: String? = nil, version: Int64? = nil, limit: Int = 100) {
            (self.status, self.route, self.project, self.version, self.limit) = (status, route, project, version, limit)
        }
    }

    package let capacity: Int
    let clock: any DeliveryClock
    private struct State {
        var entries: [String: Entry] = [:]
        /// Ids oldest first from `head` on; the evicted prefix is dropped in one go once it is as long as the capacity.
        var order: [String] = []
        var head = 0
        var next = 0
    }
    private let state = NIOLockedValueBox(State())
    /// Ids stay unique across restarts: a random prefix per process, then a counter.
    private let prefix = String(UInt32.random(in: 0...UInt32.max), radix: 16)

    /// Told every change of an entry, when the history is shared with other replicas.
    let journal: (any DeliveryJournal)?

    /// The replica its pings are sent from (``Entry/replica``).
    let replica: String?

    package init(
        capacity: Int = 1000, clock: any DeliveryClock = SystemDeliveryClock(), journal: (any DeliveryJournal)? = nil, replica: String? = nil
    ) {
        self.capacity = max(1, capacity)
        self.clock = clock
        self.journal = journal
        self.replica = replica
    }

    func start(_ ping: Ping, batch: DeliveryBatch, validateOnly: Bool) -> String {
        let toDevice = ping.payload.audience.isDevice
        // The entry is copied out of the lock only for a journal (the store's); in memory, only its id is.
        let keep = journal != nil
        let (id, recorded): (String, Entry?) = state.withLockedValue { state in
            state.next += 1
            let id = Self.pingID(prefix: prefix, number: state.next, row: batch.storeRow)
            var entry = Entry(
                id: id, project: ping.project, route: ping.route, version: batch.version, eventID: batch.eventID,
                origin: batch.origin, retryOf: batch.retryOf, toDevice: toDevice, validateOnly: validateOnly,
                receivedAt: batch.receivedAt, settledAt: nil, report: nil)
            entry.decision = ping.decision
            entry.audience = toDevice ? nil : ping.payload.audience
            entry.shard = ping.schedule.shard
            entry.traceID = batch.traceID
            entry.outlier = batch.outlier ? true : nil
            entry.replica = replica
            entry.narrowed = ping.narrowedTopics?.sorted()
            state.entries[id] = entry
            state.order.append(id)
            if state.order.count - state.head > capacity {
                state.entries[state.order[state.head]] = nil
                state.head += 1
                if state.head >= capacity {
                    state.order.removeFirst(state.head)
                    state.head = 0
                }
            }
            return (id, keep ? entry : nil)
        }
        if let recorded { journal?.record(recorded) }
        return id
    }

    /// A ping's id: unique across restarts (the process's random prefix, then a counter), and naming its event's row in
    /// a shared store when it has one, so the store can keep the ping's history in that row and find it there by id.
    static func pingID(prefix: String, number: Int, row: Int64?) -> String {
        row.map { "\(prefix)-\(number)-e\($0)" } ?? "\(prefix)-\(number)"
    }

    /// The shared store's row of the event a ping was sent for, read from its id (``pingID(prefix:number:row:)``).
    package static func row(ofPing id: String) -> Int64? {
        guard let dash = id.lastIndex(of: "-"), id[dash...].hasPrefix("-e") else { return nil }
        return Int64(id[id.index(dash, offsetBy: 2)...]).flatMap { $0 > 0 ? $0 : nil }
    }

    func settle(_ id: String, _ report: DeliveryReport) {
        let now = clock.now()
        change(id) { entry in
            entry.report = report
            entry.settledAt = now
            entry.waitingUntil = nil
            entry.waitingFor = nil
        }
    }

    /// The pending ping waits until `until` for `reason` (nil: it no longer waits).
    func waiting(_ id: String, until: Date?, for reason: String?) {
        change(id) { entry in
            entry.waitingUntil = until
            entry.waitingFor = reason
        }
    }

    /// Changes the entry (if still kept) in place and tells the journal, outside the lock (a copy only for it).
    private func change(_ id: String, _ body: (inout Entry) -> Void) {
        let keep = journal != nil
        let changed: Entry? = state.withLockedValue { state in
            guard let index = state.entries.index(forKey: id) else { return nil }
            body(&state.entries.values[index])
            return keep ? state.entries.values[index] : nil
        }
        if let changed { journal?.record(changed) }
    }

    package func entry(_ id: String) -> Entry? { state.withLockedValue { $0.entries[id] } }

    /// Newest first.
    package func list(_ filter: Filter) -> [Entry] {
        state.withLockedValue { state in
            var found: [Entry] = []
            for id in state.order[state.head...].reversed() {
                guard let entry = state.entries[id] else { continue }
                if let status = filter.status, (entry.report?.status.rawValue ?? "pending") != status { continue }
                if let route = filter.route, entry.route != route { continue }
                if let project = filter.project, entry.project != project { continue }
                if let version = filter.version, entry.version.versionNumber != version { continue }
                found.append(entry)
                if found.count >= filter.limit { break }
            }
            return found
        }
    }
}

/// What the pings of one delivery share: the version they carry, why they are sent, and when the event came in.
package struct DeliveryBatch: Sendable {
    package var version: TemplateVersion
    package var eventID: String?
    package var origin: DeliveryHistory.Origin
    package var receivedAt: Date
    package var retryOf: String?
    /// Asks the destination to check without delivering, whatever the plan's `validateOnly` says (the admin API's dry run).
    package var validateOnly: Bool
    /// A version that moves no mark (``EventRecord/outlier``): sent at once, unscheduled, superseding nothing.
    package var outlier = false
    /// Pings (by route name) that stand down without a request (``DeliveryPlan/standDown``).
    package var standDown: Set<String> = []
    /// The trace its pings' spans join (``Traces/traceID(of:)``), when tracing is on.
    package var traceID: String? = nil
    /// The event's row in a shared store (``EventRecord/storeRow``): its pings' ids name it.
    package var storeRow: Int64? = nil

    package init(
        version: TemplateVersion, eventID: String? = nil, origin: DeliveryHistory.Origin, receivedAt: Date, retryOf: String? = nil,
        validateOnly: Bool = false
    ) {
        (self.version, self.eventID, self.origin, self.receivedAt, self.retryOf, self.validateOnly) =
            (version, eventID, origin, receivedAt, retryOf, validateOnly)
    }
}
