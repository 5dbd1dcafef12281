import FCMClient
import Foundation
import RelayCore

/// The last `capacity` pings with their history, for the admin API: what the relay sent, is sending, and gave up on.
///
/// Each ping is an entry from the moment it is routed (`pending`) until it settles; a dead ping keeps its attempts,
/// statuses, FCM error codes and times here until newer pings push it out.
///
/// State behind a lock, not an actor: every ping starts and settles an entry, and two actor hops per ping measured
/// more than the few dictionary operations they guard.
final class DeliveryLog: Sendable {
    /// What started a ping.
    enum Origin: String, Sendable {
        case webhook, spool, send, retry
    }

    struct Entry: Sendable {
        var id: String
        var project: String
        var route: String
        var version: TemplateVersion
        var eventID: String?
        var origin: Origin
        var retryOf: String?
        var toDevice: Bool
        var validateOnly: Bool
        var receivedAt: Date
        var settledAt: Date?
        /// Nil while pending.
        var report: DeliveryReport?
    }

    /// What a list asks for; nil fields match everything.
    struct Filter: Sendable {
        var status: String?
        var route: String?
        var project: String?
        var version: Int64?
        var limit = 100
    }

    let capacity: Int
    private struct State {
        var entries: [String: Entry] = [:]
        /// Ids oldest first from `head` on; the evicted prefix is dropped in one go once it is as long as the capacity.
        var order: [String] = []
        var head = 0
        var next = 0
    }
    private let state = Locked(State())
    /// Ids stay unique across restarts: a random prefix per process, then a counter.
    private let prefix = String(UInt32.random(in: 0...UInt32.max), radix: 16)

    init(capacity: Int = 1000) { self.capacity = max(1, capacity) }

    func start(_ ping: Ping, batch: DeliveryBatch, validateOnly: Bool) -> String {
        var toDevice = false
        if case .token = ping.message.target { toDevice = true }
        return state.withLock { state in
            state.next += 1
            let id = "\(prefix)-\(state.next)"
            state.entries[id] = Entry(
                id: id, project: ping.project, route: ping.route, version: batch.version, eventID: batch.eventID,
                origin: batch.origin, retryOf: batch.retryOf, toDevice: toDevice, validateOnly: validateOnly,
                receivedAt: batch.receivedAt)
            state.order.append(id)
            if state.order.count - state.head > capacity {
                state.entries[state.order[state.head]] = nil
                state.head += 1
                if state.head >= capacity {
                    state.order.removeFirst(state.head)
                    state.head = 0
                }
            }
            return id
        }
    }

    func settle(_ id: String, _ report: DeliveryReport) {
        let now = Date()
        state.withLock { state in
            state.entries[id]?.report = report
            state.entries[id]?.settledAt = now
        }
    }

    func entry(_ id: String) -> Entry? { state.withLock { $0.entries[id] } }

    /// Newest first.
    func list(_ filter: Filter) -> [Entry] {
        state.withLock { state in
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
struct DeliveryBatch: Sendable {
    var version: TemplateVersion
    var eventID: String?
    var origin: DeliveryLog.Origin
    var receivedAt: Date
    var retryOf: String? = nil
    /// Asks FCM to check without delivering, whatever `fcm.validateOnly` says (the admin API's dry run).
    var validateOnly = false
}
