import Foundation
import Logging
import RelayCore
import Tracing

extension Dispatcher {
    /// Waits for the ping's quiet period and its shard's turn in the wave. Nil: it goes; else how it ended instead
    /// (`superseded`: a newer version took its place; `interrupted`: the stop came first, and it is handed over).
    func waitForTurn(
        _ ping: Ping, version: Int64, shards: [Int], id: String, control: DeliveryControl, span: (any Span)?, logger: Logger
    ) async -> DeliveryReport.Status? {
        let route = Ping.routeName(ping.route)
        let audience = ping.audience
        let quiet = ping.schedule.quiet
        if quiet > .zero {
            let key = Schedules.Key(project: ping.project, route: audience)
            guard schedules.enterQuiet(key, route: ping.route, audience: ping.payload.audience.key, version: version, until: clock.instant() + quiet)
            else {
                metrics.quietPeriod(project: ping.project, route: route, outcome: "replaced")
                logger.notice("ping stands down: a newer version waits in the route's quiet period")
                return .superseded
            }
            history.waiting(id, until: clock.now().addingTimeInterval(Schedules.seconds(quiet)), for: "quiet period")
            span?.addEvent(SpanEvent(name: "quiet period", attributes: ["rc_relay.wait_seconds": .double(Schedules.seconds(quiet))]))
            control.onRetry(quiet)  // the sender is answered now: the ping goes later
            // Until the period's end: a pause also ends early when an operator discards another route of the event.
            let end = clock.instant() + quiet
            while !control.isStopped, clock.instant() < end { _ = await control.pause(for: end - clock.instant()) }
            let goes = schedules.leaveQuiet(key, version: version)
            if control.isStopped { return goes ? .interrupted : .superseded }
            guard goes else {
                metrics.quietPeriod(project: ping.project, route: route, outcome: "replaced")
                logger.notice("ping stands down: a newer version arrived in its quiet period")
                return .superseded
            }
            metrics.quietPeriod(project: ping.project, route: route, outcome: "sent")
        }
        if let shard = ping.schedule.shard {
            let key = Schedules.Key(project: ping.project, route: route)
            // Asked again after every wait: a newer version may have taken the wave over, or a 429 postponed it.
            while true {
                guard let turn = schedules.turn(key, version: version, shard: shard.index, present: shards, spacing: shard.spacing) else {
                    logger.notice("shard ping stands down: a newer version took the wave over")
                    return .superseded
                }
                if turn.began { metrics.waveStarted(project: ping.project, route: route) }
                let wait = turn.at - clock.instant()
                if wait <= .zero { break }
                history.waiting(
                    id, until: clock.now().addingTimeInterval(Schedules.seconds(wait)), for: "wave turn of shard \(shard.index)")
                span?.addEvent(
                    SpanEvent(
                        name: "wave turn",
                        attributes: [
                            "rc_relay.shard": .int64(Int64(shard.index)), "rc_relay.shards": .int64(Int64(shard.count)),
                            "rc_relay.wait_seconds": .double(Schedules.seconds(wait)),
                        ]))
                control.onRetry(wait)
                _ = await control.pause(for: wait)
                // Stopped: handed over to the spool, unless a newer version holds the wave (it owes this shard).
                if control.isStopped { return schedules.isHeldByNewer(key, than: version) ? .superseded : .interrupted }
            }
            schedules.sent(key, version: version, shard: shard.index)
            metrics.waveShard(project: ping.project, route: route)
        }
        history.waiting(id, until: nil, for: nil)
        if latest.isSuperseded(project: ping.project, route: audience, version: version, now: clock.now()) {
            logger.notice("ping stands down: a newer version's ping went to the same audience")
            return .superseded
        }
        return nil
    }
}
