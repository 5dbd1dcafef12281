import Foundation
import NIOConcurrencyHelpers
import RelayCore

/// The quiet periods and waves under way, per project and route: when each scheduled ping may make its first attempt,
/// and whether a newer version has taken its place.
///
/// - A **quiet period** (`debounceSeconds`) is kept per route and audience: a ping enters it with its version and
///   waits; one that finds, or later sees, a newer version there stands down (the newer ping carries the newer version).
/// - A **wave** is kept per route: each shard's turn, as an instant on the engine's clock. The first ping of a version
///   lays out the turns of all the version's shards (in shard order, one spacing apart, from now). A newer version
///   takes the wave over where it stands: the shards not yet pinged keep their turns and get the newer version; the
///   shards already pinged get it after the last turn, one spacing apart. An older version's ping stands down. A 429
///   postpones every turn still to come.
///
/// Entries end with the pings they schedule, so the tables are as large as the routes with something under way (and
/// one version number per waved route).
package final class Schedules: Sendable {
    /// A quiet period waiting for its end, for the admin API.
    package struct QuietPeriod: Sendable, Equatable {
        package var project: String
        package var route: String
        package var audience: String
        package var version: Int64
        package var until: Date
    }

    /// A wave's progress, for the admin API.
    package struct WaveProgress: Sendable, Equatable {
        package var project: String
        package var route: String
        package var version: Int64
        package var shards: Int
        /// Shards whose ping of this version has gone out (its first attempt started).
        package var sent: Int
        package var startedAt: Date
        /// The next shard's turn; nil when every turn has come.
        package var nextSendAt: Date?
    }

    struct Key: Hashable {
        var project: String
        var route: String
    }

    private struct Quiet {
        var route: String
        var version: Int64
        var until: Duration
        var audience: String
    }

    private struct Wave {
        var version: Int64
        var turns: [Int: Duration]
        var sent: Set<Int> = []
        var ended: Set<Int> = []
        var startedAt: Duration
    }

    private struct State {
        var quiet: [Key: Quiet] = [:]
        var waves: [Key: Wave] = [:]
        /// The newest version that laid out each route's wave, kept after the wave ends (as many as the routes): an
        /// older version's shard ping is superseded by it, whether its wave is still under way or done.
        var newest: [Key: Int64] = [:]
    }

    private let state = NIOLockedValueBox(State())
    let clock: any DeliveryClock

    init(clock: any DeliveryClock) { self.clock = clock }

    // MARK: Quiet periods

    /// Enters the ping's quiet period, which ends at `until`; false when a newer version is waiting there already.
    func enterQuiet(_ key: Key, route: String, audience: String, version: Int64, until: Duration) -> Bool {
        state.withLockedValue { state in
            if let waiting = state.quiet[key], waiting.version > version { return false }
            state.quiet[key] = Quiet(route: route, version: version, until: until, audience: audience)
            return true
        }
    }

    /// Leaves the quiet period; true when no newer version entered it meanwhile (the ping goes).
    func leaveQuiet(_ key: Key, version: Int64) -> Bool {
        state.withLockedValue { state in
            guard let waiting = state.quiet[key] else { return true }
            if waiting.version > version { return false }
            if waiting.version == version { state.quiet[key] = nil }
            return true
        }
    }

    // MARK: Waves

    /// A shard's turn: when its ping may go, on the engine's ``DeliveryClock/instant()``.
    struct Turn {
        var at: Duration
        /// This call laid the version's wave out (a new wave, or a newer version taking one over).
        var began: Bool
    }

    /// The shard's turn for its ping of `version`; nil when a newer version holds the wave. `present`: the version's
    /// shards being delivered (all of them, or those a spooled event still owes), laid out on the version's first call.
    func turn(_ key: Key, version: Int64, shard: Int, present: [Int], spacing: Duration) -> Turn? {
        state.withLockedValue { state -> Turn? in
            let now = clock.instant()  // under the lock: a takeover never reads a time older than a turn just taken
            if let newest = state.newest[key], newest > version { return nil }
            guard var wave = state.waves[key], wave.version >= version else {
                let wave = Self.layOut(over: state.waves[key], version: version, shards: present, spacing: spacing, now: now)
                state.waves[key] = wave
                state.newest[key] = version
                return Turn(at: wave.turns[shard] ?? now, began: true)
            }
            guard wave.version == version else { return nil }
            if let turn = wave.turns[shard] { return Turn(at: turn, began: false) }
            // A shard this version did not lay out (a parked retry of one): after the last turn.
            let turn = max(wave.turns.values.max().map { $0 + spacing } ?? now, now)
            wave.turns[shard] = turn
            state.waves[key] = wave
            return Turn(at: turn, began: false)
        }
    }

    private static func layOut(over previous: Wave?, version: Int64, shards: [Int], spacing: Duration, now: Duration) -> Wave {
        var turns: [Int: Duration] = [:]
        var again: [Int] = []
        for shard in shards.sorted() {
            // A turn still to come keeps its time; a shard already pinged (or new to the wave) goes again after.
            if let turn = previous?.turns[shard], turn > now, previous?.sent.contains(shard) == false {
                turns[shard] = turn
            } else {
                again.append(shard)
            }
        }
        var next = turns.values.max().map { $0 + spacing } ?? now
        for shard in again {
            turns[shard] = next
            next += spacing
        }
        return Wave(version: version, turns: turns, startedAt: now)
    }

    /// The shard's ping of `version` goes out now.
    func sent(_ key: Key, version: Int64, shard: Int) {
        state.withLockedValue { state in
            guard state.waves[key]?.version == version else { return }
            state.waves[key]?.sent.insert(shard)
        }
    }

    /// The shard's ping of `version` is done with the wave (sent, stood down, or stopped); the wave ends with its
    /// last shard.
    func ended(_ key: Key, version: Int64, shard: Int) {
        state.withLockedValue { state in
            guard var wave = state.waves[key], wave.version == version else { return }
            wave.ended.insert(shard)
            state.waves[key] = wave.ended.isSuperset(of: wave.turns.keys) ? nil : wave
        }
    }

    /// The destination's quota ran out (a 429) during the wave, and the ping that got it retries in `delay`: no turn still to come is earlier
    /// than that retry. The turns move together, keeping their spacing; several 429s do not add up.
    func postpone(_ key: Key, by delay: Duration) {
        state.withLockedValue { state in
            let now = clock.instant()
            guard var wave = state.waves[key] else { return }
            let pending = wave.turns.filter { !wave.sent.contains($0.key) && !wave.ended.contains($0.key) }
            guard let earliest = pending.values.min() else { return }
            let shift = now + delay - max(earliest, now)
            guard shift > .zero else { return }
            for (shard, turn) in pending { wave.turns[shard] = max(turn, now) + shift }
            state.waves[key] = wave
        }
    }

    /// Whether a newer version than `version` has laid out the route's wave (it owes every shard).
    func isHeldByNewer(_ key: Key, than version: Int64) -> Bool {
        state.withLockedValue { ($0.newest[key] ?? .min) > version }
    }

    /// Forgets the project's newest wave versions (an operator's reset of its marks); waves and quiet periods under
    /// way go on.
    func reset(project: String) {
        state.withLockedValue { state in state.newest = state.newest.filter { $0.key.project != project } }
    }

    // MARK: For the admin API

    package var quietPeriods: [QuietPeriod] {
        let (now, instant) = (clock.now(), clock.instant())
        return state.withLockedValue { state in
            state.quiet.map { key, quiet in
                QuietPeriod(
                    project: key.project, route: quiet.route, audience: quiet.audience, version: quiet.version,
                    until: now.addingTimeInterval(Self.seconds(quiet.until - instant)))
            }
        }.sorted { ($0.project, $0.route, $0.audience) < ($1.project, $1.route, $1.audience) }
    }

    package var waves: [WaveProgress] {
        let (now, instant) = (clock.now(), clock.instant())
        return state.withLockedValue { state in
            state.waves.map { key, wave in
                let next = wave.turns.filter { !wave.sent.contains($0.key) && !wave.ended.contains($0.key) }.values.min()
                return WaveProgress(
                    project: key.project, route: key.route, version: wave.version, shards: wave.turns.count, sent: wave.sent.count,
                    startedAt: now.addingTimeInterval(Self.seconds(wave.startedAt - instant)),
                    nextSendAt: next.map { now.addingTimeInterval(Self.seconds(max($0, instant) - instant)) })
            }
        }.sorted { ($0.project, $0.route) < ($1.project, $1.route) }
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
