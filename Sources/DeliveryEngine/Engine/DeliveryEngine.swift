import CoreMetrics
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayCore
import ServiceLifecycle
import Tracing

/// Deduplication, the in-flight registry, fan-out, retries, the outbound limit, superseding, the spool and
/// the delivery history: everything between "this event is verified and routed" and "each ping's destination accepted it".
///
/// Its inputs are values (an event as a ``EventRecord``, a ``DeliveryPlan``), its outputs are values (outcomes and
/// ``DeliveryReport``s); it knows no HTTP server and no configuration file. Deliveries run in a task group owned by
/// ``run()``: on start it replays the spool, and on a graceful stop it gives deliveries under way
/// ``EngineSettings/drainGrace`` to settle, hands the rest over to the spool, and returns once nothing runs.
package final class DeliveryEngine: Service {
    package let history: DeliveryHistory
    package let settings: EngineSettings
    let recent: RecentEvents
    let limit: OutboundLimit
    package let pacers: Pacers
    let latest: LatestVersions
    /// Quiet periods and waves under way, for the admin API.
    package let schedules: Schedules
    let metrics: DeliveryMetrics
    let clock: any DeliveryClock
    let logger: Logger
    /// The plan for a spooled event under the configuration in force (nil: its project is no longer configured).
    let replan: @Sendable (EventRecord) async -> DeliveryPlan?
    private let tasks = DeliveryTasks()
    /// Asked before every request of an event's delivery (not an operator's send or retry); nil: always yes.
    private let fence: (any DeliveryFence)?

    package init(
        settings: EngineSettings, spool: (any Spool)?, metrics factory: any MetricsFactory, clock: any DeliveryClock = SystemDeliveryClock(),
        logger: Logger, journal: (any DeliveryJournal)? = nil, fence: (any DeliveryFence)? = nil,
        replan: @escaping @Sendable (EventRecord) async -> DeliveryPlan?
    ) {
        self.fence = fence
        let metrics = DeliveryMetrics(factory: factory, services: settings.services)
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
        self.replan = replan
        history = DeliveryHistory(capacity: settings.historySize, clock: clock, journal: journal, replica: settings.replica)
        limit = OutboundLimit(limit: settings.outboundConcurrency)
        pacers = Pacers(rate: settings.messagesPerSecond, clock: clock)
        // A parked event claims its audience again only at its next try: the claim must outlast that wait.
        latest = LatestVersions(lifetime: max(settings.supersedeWindow, settings.parkedRetryInterval * 2))
        schedules = Schedules(clock: clock)
        recent = RecentEvents(
            window: settings.dedupWindow, capacity: settings.dedupCapacity, maxInFlight: settings.maxInFlight,
            parkedRetryInterval: settings.parkedRetryInterval, spool: spool, clock: clock, tasks: tasks,
            parkedChanged: { metrics.undelivered.record($0) })
    }

    /// Acknowledged events whose pings have not been accepted yet, waiting to be tried again.
    package var parked: Int { recent.parked }
    /// Pings waiting for or in a `messages:send`.
    package var queueDepth: Int { metrics.queueDepth }

    /// Starts the event's delivery (or joins the one under way) and waits up to `wait` for its first news.
    /// `onDisk`: the record comes from the spool, so it is acknowledged already.
    package func deliver(
        _ record: EventRecord, plan: DeliveryPlan, origin: DeliveryHistory.Origin = .webhook, wait: Duration, onDisk: Bool = false,
        logger: Logger
    ) async -> RecentEvents.Outcome {
        let dispatcher = dispatcher(plan.send)
        // The caller's span (the request's, a poll's, a replay's): the pings' spans are its children, though they run
        // in the engine's tasks and may outlive it (a wave's shards).
        let trace = Traces.current
        let batch = {
            var batch = DeliveryBatch(version: record.version, eventID: record.eventID, origin: origin, receivedAt: record.receivedAt)
            batch.outlier = record.outlier == true
            batch.standDown = plan.standDown
            batch.traceID = Traces.traceID(of: trace)
            batch.storeRow = record.storeRow
            return batch
        }()
        return await recent.deliver(record, wait: wait, onDisk: onDisk) { routes, control in
            // A spooled or parked event sends only the routes still due; a route due in part is sent whole, since its
            // parts may be cut otherwise now (never fewer pings than needed).
            // A due name the configuration no longer makes (a shard of a wave that changed, a route waved since) stands
            // for its whole route: never fewer pings than needed.
            let done = Set(record.done ?? [])
            let due =
                (routes.map { routes in
                    let bases = Set(routes.map(Ping.baseRoute))
                    let made = Set(plan.pings.map { Ping.baseRoute($0.route) })
                    let whole = Set(bases.subtracting(made).map(Ping.routeName))
                    return plan.pings.filter { bases.contains(Ping.baseRoute($0.route)) || whole.contains(Ping.routeName($0.route)) }
                } ?? plan.pings).filter { !done.contains($0.route) }  // accepted before a crash or a hand-over
            return await Traces.within(trace) { await dispatcher.deliver(due, batch: batch, control: control, logger: logger) }
        }
    }

    /// Starts the delivery of an event kept on disk or in the shared store (a replay on start, a project taken over),
    /// without waiting. Its trace goes on, when it came with one: a span of the replay, child of its request's.
    package func deliverKept(_ record: EventRecord, plan: DeliveryPlan, logger: Logger) async {
        await Traces.withSpan("replay kept event", context: Traces.context(traceparent: record.traceparent) ?? .topLevel) { span in
            span?.attributes["rc_relay.project"] = record.project
            span?.attributes["rc_relay.version"] = record.version.versionNumber
            var logger = logger
            if let trace = Traces.traceID(of: span?.context) { logger[metadataKey: "trace_id"] = "\(trace)" }
            _ = await deliver(record, plan: plan, origin: .spool, wait: .zero, onDisk: true, logger: logger)
        }
    }

    /// Whether the event is being delivered here, or was delivered within the deduplication window.
    package func knows(_ record: EventRecord) -> Bool { recent.knows(record) }

    /// Seeds what was accepted per route and audience from another replica's history (a project taken over), so an
    /// older version's ping does not follow a newer one there. Only what a real delivery of a received event would have
    /// noted counts (as ``Dispatcher`` notes it): not a dry run, a ping to one device, an operator's send, or an
    /// outlier's ping, none of which says what the project's devices were told last (issue #49: a far version, once
    /// accepted, made every later real version stand down after a restart).
    package func noteAccepted(_ entries: [DeliveryHistory.Entry]) {
        for entry in entries
        where entry.report?.status == .accepted && !entry.validateOnly && !entry.toDevice && entry.origin != .send && entry.outlier != true {
            guard let audience = entry.audience else { continue }
            let key = Ping.audience(route: entry.route, audience: audience)
            latest.noteAccepted(project: entry.project, route: key, version: entry.version.versionNumber)
            // And across a change-aware route's overlapping audiences (a wave's shard reaches no narrowed audience).
            guard entry.shard == nil else { continue }
            latest.noteReach(
                family: LatestVersions.family(project: entry.project, route: entry.route), audience: key, topics: entry.narrowed.map(Set.init))
        }
    }

    /// Forgets the versions the project's routes sent and the waves they hold (an operator's reset of its marks).
    package func resetMarks(project: String) {
        latest.reset(project: project)
        schedules.reset(project: project)
    }

    /// Stops the deliveries of the project's events, which another replica delivers now (it took the project over): each hands
    /// what is still due back to the spool, and nothing more is sent for them here. Returns how many were stopped.
    package func standDown(project: String) -> Int { recent.standDown(project: project) }

    /// Writes a pending delivery to the spool before the sender is told 202; if it settled first, says so instead.
    package func acknowledge(_ delivery: RecentEvents.EventDelivery) throws -> RecentEvents.Acknowledgement {
        try recent.acknowledge(delivery)
    }

    /// Gives up on the route's ping of the acknowledged event waiting under `key`; false when no such event waits.
    package func discard(key: String, route: String) -> Bool { recent.discard(key: key, route: route) }

    /// Sends pings outside any event (the admin API's send and retry): no deduplication, no spool; the caller waits.
    package func send(_ pings: [Ping], batch: DeliveryBatch, plan: SendPlan, logger: Logger) async -> [DeliveryReport] {
        await dispatcher(plan).deliver(pings, batch: batch, control: DeliveryControl(clock: clock), logger: logger)
    }

    /// Asks the fence whether a request for the project's event may start; a refusal stands the project's deliveries here
    /// down (each hands what it still owes back to the spool). Nil: it may.
    private func refusal(project: String) async -> String? {
        guard let fence, let refusal = await fence.refusal(project: project) else { return nil }
        _ = standDown(project: project)
        return refusal
    }

    /// Replays the spool, runs deliveries until a stop, then drains and hands over.
    package func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.tasks.run() }
            await replaySpool()
            let graceful = (try? await gracefulShutdown()) != nil
            handOver(await recent.drain(within: graceful ? settings.drainGrace : .zero))
            tasks.close()
        }
    }

    private func dispatcher(_ plan: SendPlan) -> Dispatcher {
        var dispatcher = Dispatcher(
            plan: plan, limit: limit, pacers: pacers, latest: latest, schedules: schedules, history: history, metrics: metrics, clock: clock,
            replica: settings.replica, planted: settings.planted)
        if fence != nil {
            let ask: @Sendable (String) async -> String? = { [weak self] project in
                guard let self else { return nil }
                return await self.refusal(project: project)
            }
            dispatcher.fence = ask
        }
        return dispatcher
    }

    /// Starts the delivery of every event left on disk (files that are not an event are moved aside, never trapped on).
    private func replaySpool() async {
        guard let spool = recent.spool else { return }
        let recovery = spool.recover()
        for (file, reason) in recovery.quarantined {
            logger.error("spooled record moved to quarantine: it is not an event", metadata: ["file": "\(file)", "reason": "\(reason)"])
            metrics.spoolQuarantined.increment()
        }
        if recovery.temporaryFilesRemoved > 0 {
            logger.notice("removed unfinished spool writes left by a crash", metadata: ["count": "\(recovery.temporaryFilesRemoved)"])
        }
        if !recovery.records.isEmpty { logger.notice("replaying spooled events", metadata: ["count": "\(recovery.records.count)"]) }
        var planned: [(record: EventRecord, plan: DeliveryPlan, context: Logger)] = []
        for record in recovery.records {
            var logger = logger
            logger[metadataKey: "event_id"] = "\(record.eventID ?? "-")"
            logger[metadataKey: "project"] = "\(record.project)"
            logger[metadataKey: "version"] = "\(record.version.versionNumber)"
            guard let plan = await replan(record) else {
                logger.error("spooled event kept on disk: its project is no longer configured")
                continue
            }
            planned.append((record, plan, logger))
        }
        // Newest first, each older version standing down per audience (``DeliveryPlan/newestFirst(_:)``).
        for (record, plan, logger) in DeliveryPlan.newestFirst(planned) {
            await deliverKept(record, plan: plan, logger: logger)
        }
    }

    private func handOver(_ ended: [RecentEvents.HandOver]) {
        for ended in ended {
            switch ended {
            case .settled:
                continue
            case .spooled(let record):
                logger.notice("delivery unfinished at shutdown: spooled for the next start", metadata: Self.metadata(record))
            case .lost(let record):
                logger.error("delivery unfinished at shutdown and not spooled: lost unless the sender retries", metadata: Self.metadata(record))
            }
        }
    }

    private static func metadata(_ record: EventRecord) -> Logger.Metadata {
        [
            "event_id": "\(record.eventID ?? "-")", "version": "\(record.version.versionNumber)",
            "routes": "\(record.routes?.joined(separator: ",") ?? "all")",
        ]
    }
}
