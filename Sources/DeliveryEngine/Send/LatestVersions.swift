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
    /// The newest version accepted per route and audience, kept until an operator resets the project: a ping of an
    /// older version never follows it there, whenever it arrives (a sender's late retry, kept events replayed
    /// out of order after a database stall, a replica that takes a project over).
    private let accepted = NIOLockedValueBox<[String: Int64]>([:])
    /// A change-aware route's audiences overlap: its whole topic reaches every narrowed audience's devices, and a
    /// condition those of each topic it names. Per project and route, the audiences that sent, each with the topics
    /// it reaches (nil: the route's whole audience); the versions under way and accepted there are `latest`'s and
    /// `accepted`'s, by the same audience key.
    private let reaches = NIOLockedValueBox<[String: [String: Reach]]>([:])
    /// One ``start(_:version:now:)`` at a time: its checks and its claim are one step.
    private let starting = NIOLock()

    private struct Reach {
        var topics: Set<String>?
    }

    /// Whether a newer version's ping reaches every device of `ping`'s narrowed audience: one was accepted
    /// (`accepted`), or one is under way (`underWay`). A ping to a route's whole audience is never covered by a
    /// narrowed one (its other devices need it).
    enum Cover { case none, accepted, underWay }

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

    /// Records that `version`'s ping was accepted on the route and audience.
    func noteAccepted(project: String, route: String, version: Int64) {
        accepted.withLockedValue { accepted in
            let key = "\(project)/\(route)"
            if version > accepted[key] ?? Int64.min { accepted[key] = version }
        }
    }

    /// Whether a newer version's ping was accepted on the route and audience already.
    func isBehindAccepted(project: String, route: String, version: Int64) -> Bool {
        accepted.withLockedValue { ($0["\(project)/\(route)"] ?? Int64.min) > version }
    }

    /// Whether a newer version's ping to an audience that covers `ping`'s was accepted, or is under way (within the
    /// lifetime): its devices have heard of the newer version, so the older one must not follow it (issue #49).
    func cover(of ping: Ping, version: Int64, now: Date) -> Cover {
        guard let topics = ping.narrowedTopics else { return .none }
        let audiences = reaches.withLockedValue { $0[Self.family(ping)] ?? [:] }
        var cover = Cover.none
        for (audience, reach) in audiences where audience != ping.audience && (reach.topics?.isSuperset(of: topics) ?? true) {
            if isBehindAccepted(project: ping.project, route: audience, version: version) { return .accepted }
            if isSuperseded(project: ping.project, route: audience, version: version, now: now) { cover = .underWay }
        }
        return cover
    }

    /// Records that `version`'s ping was accepted, with what its audience reaches.
    func accepted(_ ping: Ping, version: Int64) {
        noteReach(ping)
        noteAccepted(project: ping.project, route: ping.audience, version: version)
    }

    /// Notes what the ping's audience reaches (a wave's shard is a part of its own: it covers no narrowed audience).
    private func noteReach(_ ping: Ping) {
        guard ping.schedule.shard == nil else { return }
        noteReach(family: Self.family(ping), audience: ping.audience, topics: ping.narrowedTopics)
    }

    /// The same, for a ping known by its route's family (project and route), its audience and its narrowed topics: what
    /// a replica that takes a project over reads from the shared history (``DeliveryEngine/noteAccepted(_:)``).
    func noteReach(family: String, audience: String, topics: Set<String>?) {
        reaches.withLockedValue { $0[family, default: [:]][audience] = Reach(topics: topics) }
    }

    enum Start { case go, behind, underWay }

    /// Right before an attempt of `version`'s ping, checked and claimed in one step (one start at a time): `behind`
    /// when a newer version's ping to its audience was accepted, or to one that covers it; `underWay` when a newer
    /// version's request to either started within the lifetime; otherwise `go`, with this version claimed there. So
    /// an older version's request never starts after a newer one's has (issue #49), and a narrowed audience's never
    /// after its route's whole audience's.
    func start(_ ping: Ping, version: Int64, now: Date) -> Start {
        starting.withLock {
            if isBehindAccepted(project: ping.project, route: ping.audience, version: version) { return .behind }
            switch cover(of: ping, version: version, now: now) {
            case .accepted: return .behind
            case .underWay: return .underWay
            case .none: break
            }
            guard claim(project: ping.project, route: ping.audience, version: version, now: now) else { return .underWay }
            noteReach(ping)
            return .go
        }
    }

    private static func family(_ ping: Ping) -> String { family(project: ping.project, route: ping.route) }
    static func family(project: String, route: String) -> String { "\(project)/\(Ping.baseRoute(route))" }

    /// Forgets what the project's routes sent (an operator's reset of its marks).
    func reset(project: String) {
        let prefix = "\(project)/"
        latest.withLockedValue { $0 = $0.filter { !$0.key.hasPrefix(prefix) } }
        accepted.withLockedValue { $0 = $0.filter { !$0.key.hasPrefix(prefix) } }
        reaches.withLockedValue { $0 = $0.filter { !$0.key.hasPrefix(prefix) } }
    }
}

extension Ping {
    /// The route and the devices a ping reaches (`route|topic or condition`): what superseding and the spool's "only
    /// the newest version per audience" are keyed by.
    package var audience: String { Self.audience(route: route, audience: payload.audience) }

    package static func audience(route: String, audience: PingAudience) -> String { "\(route)|\(audience.key)" }
}
