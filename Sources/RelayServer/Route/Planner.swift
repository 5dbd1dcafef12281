import DeliveryEngine
import FCMClient
import Logging
import RelayCore
import Tracing

extension TemplateChange {
    /// As the `plan` span's `rc_relay.change` attribute says it.
    fileprivate var traceName: String {
        switch self {
        case .notNeeded: "not needed"
        case .known: "known"
        case .unknown: "unknown"
        }
    }
}

/// The route stage: a version's pings for one project. When a route is change-aware (`when.changed`, `audience`), what
/// the version changed is fetched first (``TemplateChanges``); otherwise nothing is asked of Remote Config and routing
/// costs what it always did.
struct Planner: Sendable {
    let changes: TemplateChanges
    let clock: any DeliveryClock
    let metrics: RelayMetrics

    /// The one entry point that plans, whoever brought the event (a webhook, a poll, a kept event swept or replayed):
    /// what delivering `record` means under `configuration` (the one in force when it came, or now for a kept event),
    /// its pings and how they are sent; nil when its project is not configured there. `since`: the newest version
    /// relayed before it, if known (a change-aware route then sees every change since, skipped versions included).
    func plan(_ record: EventRecord, since: Int64?, in configuration: RelayConfiguration, logger: Logger) async -> DeliveryPlan? {
        guard let pipeline = configuration.projects[record.project] else { return nil }
        let (version, project, settings) = (record.version, record.project, configuration.settings)
        // A span (`plan`); a change-aware route's template fetches are its children.
        return await Traces.withSpan("plan") { span in
            let change = await change(version, since: since, project: project, pipeline: pipeline, settings: settings, logger: logger)
            let plan = pipeline.plan(for: version, project: project, change: change)
            span?.attributes["rc_relay.project"] = project
            span?.attributes["rc_relay.version"] = version.versionNumber
            span?.attributes["rc_relay.change"] = change.traceName
            span?.attributes["rc_relay.pings"] = plan.pings.count
            return plan
        }
    }

    /// What `version` changed (since `from`, when given), when a route asks (or `always`); `.notNeeded` when none does. Remote Config calls end
    /// within `within` (default: half of `delivery.answerWithinSeconds`). `preview`: not a version being routed, so
    /// the outcome is not counted in the metric.
    func change(
        _ version: TemplateVersion, since: Int64? = nil, from: Int64? = nil, project: String, pipeline: ProjectDirectory.Pipeline,
        settings: RelaySettings, within: Duration? = nil, always: Bool = false, preview: Bool = false, logger: Logger
    ) async -> TemplateChange {
        guard always || pipeline.routes.isChangeAware else { return .notNeeded }
        let calls = RemoteConfigCalls(client: pipeline.remoteConfig, policy: settings.retryPolicy, clock: clock, metrics: metrics)
        let change = await changes.change(
            for: version, since: since, from: from, project: project, calls: calls, within: within ?? settings.answerWithin / 2, counted: !preview,
            logger: logger)
        if case .unknown(let why) = change {
            logger.warning("what the version changed is unknown: change-aware routes ping their whole audience", metadata: ["reason": "\(why)"])
        }
        return change
    }
}
