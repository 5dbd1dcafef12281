import Foundation
import NIOConcurrencyHelpers
import RelayCore

/// The newest template version each route has sent for a received event, so an older ping still waiting to retry can
/// stand down: pings are idempotent "your config is stale" signals, and the newer one carries the newer version.
///
/// Only real deliveries of received events record here (webhook, Pub/Sub, spool replay, an admin retry of one): a dry
/// run, a test ping to one device or any other admin send says nothing about what devices were told. A record lives
/// `lifetime` (the retry deadline): after that no older ping can still be waiting to retry, so it has no purpose left.
final class LatestVersions: Sendable {
    let lifetime: TimeInterval
    private let latest = NIOLockedValueBox<[String: (version: Int64, at: Date)]>([:])
    /// The newest version FCM accepted per route and audience, kept until an operator resets the project: a ping of an
    /// older version never follows it there, whenever it arrives (a sender's late retry, kept events replayed
    /// out of order after a database stall, a replica that takes a project over).
    private let accepted = NIOLockedValueBox<[String: Int64]>([:])

    init(lifetime: Duration = .seconds(900)) {
        self.lifetime = Double(lifetime.components.seconds) + Double(lifetime.components.attoseconds) / 1e18
    }

    /// Records that `version` is being sent on the route (the newest seen is kept).
    func record(project: String, route: String, version: Int64, now: Date) {
        _ = claim(project: project, route: route, version: version, now: now)
    }

    /// Right before an attempt of `version` on the route: false when a newer version's attempt started there within the
    /// lifetime; otherwise records `version` as under way now, in one step under the lock. Refreshed at every attempt,
    /// so a ping still being tried (a parked one included) keeps the route: an older version's request never starts
    /// after a newer one's has (issue #49).
    func claim(project: String, route: String, version: Int64, now: Date) -> Bool {
        let key = "\(project)/\(route)"
        return latest.withLockedValue { latest in
            // Keys are routes, so the table is as small as the configuration; an expired entry is simply replaced.
            if let known = latest[key], now.timeIntervalSince(known.at) < lifetime, known.version > version { return false }
            latest[key] = (version, now)
            return true
        }
    }

    /// Whether a newer version than `version` has been sent on the route within the lifetime.
    func isSuperseded(project: String, route: String, version: Int64, now: Date) -> Bool {
        let key = "\(project)/\(route)"
        return latest.withLockedValue { latest in
            guard let known = latest[key], now.timeIntervalSince(known.at) < lifetime else { return false }
            return known.version > version
        }
    }

    /// Records that FCM accepted `version`'s ping on the route and audience.
    func noteAccepted(project: String, route: String, version: Int64) {
        accepted.withLockedValue { accepted in
            let key = "\(project)/\(route)"
            if version > accepted[key] ?? Int64.min { accepted[key] = version }
        }
    }

    /// Whether FCM accepted a newer version's ping on the route and audience already.
    func isBehindAccepted(project: String, route: String, version: Int64) -> Bool {
        accepted.withLockedValue { ($0["\(project)/\(route)"] ?? Int64.min) > version }
    }

    /// Forgets what the project's routes sent (an operator's reset of its marks).
    func reset(project: String) {
        let prefix = "\(project)/"
        latest.withLockedValue { $0 = $0.filter { !$0.key.hasPrefix(prefix) } }
        accepted.withLockedValue { $0 = $0.filter { !$0.key.hasPrefix(prefix) } }
    }
}

extension Ping {
    /// The route and the devices a ping reaches (`route|topic or condition`): what superseding and the spool's "only
    /// the newest version per audience" are keyed by.
    package var audience: String { Self.audience(route: route, target: message.target) }

    package static func audience(route: String, target: FCMMessage.Target) -> String { "\(route)|\(target.key)" }
}
