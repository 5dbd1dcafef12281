import DeliveryEngine
import Logging
import RelayStore
import Tracing

/// The one path of an event, whoever brought it (a webhook or Pub/Sub push, a catch-up poll): admit it (deduplicated,
/// and kept where the storage keeps events), plan it (``Planner``, the one entry point), deliver it (the engine), keep
/// what has not settled within its bringer's wait, and move the newest-relayed mark (``RelayMarks``) once it is
/// relayed. Its bringers only decide what the outcome means to them: an HTTP answer, a poll's outcome. An event kept in
/// the shared outbox is admitted already; its holder's sweep plans it through the same planner and hands it to the
/// engine (`ProjectLeases+Outbox.swift`), and the store moves its mark when it settles.
struct EventPath: Sendable {
    let engine: DeliveryEngine
    let planner: Planner
    /// Where the event is kept and who delivers its project (this process alone, or replicas sharing a store).
    let admission: any Admission
    let marks: RelayMarks
    /// Tells a version Remote Config could not have published (relayed, but moving no mark).
    let versions: VersionCheck

    /// How an event came: how it is admitted, what its change is measured from, how its history names it.
    enum Arrival: Sendable {
        /// A request (a webhook, a Pub/Sub push), admitted by its keys; its change is measured from this process's mark.
        case request
        /// A version catch-up polling found under `claim` (admitted only while the claim holds), measured from `since`.
        case poll(PollClaim, since: Int64)
    }

    /// What the path came to.
    enum Outcome: Sendable {
        /// Its delivery settled (`duplicate`: an earlier delivery's, whose reports these are).
        case settled([DeliveryReport], duplicate: Bool)
        /// Kept where a restart or the project's holder finds it, and still delivering (`here`: in this process).
        case kept(here: Bool)
        /// Still delivering, and nothing keeps it: a retry (after `retryAfter`, when known) joins the delivery.
        case underWay(retryAfter: Duration?)
        /// Not started.
        case notStarted(NotStarted)
    }

    enum NotStarted: Sendable, Equatable {
        /// The shared store did not answer: nothing was kept.
        case storeUnavailable
        /// Its id belongs to another event (`key`).
        case conflict(String)
        /// Too many deliveries under way.
        case saturated
        /// The relay is stopping.
        case stopping
        /// Its project is not in the configuration it was planned under.
        case unplanned
        /// Not this poll's to relay (its claim lapsed, or its id belongs to another event).
        case left
    }

    /// Admits, plans, delivers and keeps `record` under `configuration`; the bringer waits up to
    /// `delivery.answerWithinSeconds` from the plan's start (at least a tenth of it after planning).
    func relay(_ record: EventRecord, arriving arrival: Arrival, in configuration: RelayConfiguration, logger: Logger) async -> Outcome {
        var record = record
        let settings = configuration.settings
        let (onDisk, since, origin): (Bool, Int64?, DeliveryHistory.Origin)
        switch arrival {
        case .request:
            if await isOutlier(record, in: configuration, logger: logger) { record.outlier = true }
            switch await admit(record, window: settings.dedupWindow, logger: logger) {
            case nil: return .notStarted(.storeUnavailable)
            case .deliverHere(let committed, let row):
                record.storeRow = row
                (onDisk, since, origin) = (committed, marks.newest(record.project), .webhook)
            case .elsewhere:
                noteRelayed(record, logger: logger)
                return .kept(here: false)
            case .settled(let reports): return settled(record, reports, duplicate: true, logger: logger)
            case .conflict(let key): return .notStarted(.conflict(key))
            }
        case .poll(let claim, let known):
            switch await admission.admitPolled(record, claim: claim, window: settings.dedupWindow, logger: logger) {
            case .deliverHere(let row):
                record.storeRow = row
                (onDisk, since, origin) = (admission.keepsAdmitted, known, .poll)
            // A webhook's event for the version is kept already, with what of it was sent: that event's delivery sends
            // the rest (a poll event of its own would send it all again).
            case .keptAlready: return .underWay(retryAfter: nil)
            case .settled: return settled(record, [], duplicate: true, logger: logger)
            case .leave: return .notStarted(.left)
            }
        }
        let started = ContinuousClock.now
        guard let plan = await planner.plan(record, since: since, in: configuration, logger: logger) else { return .notStarted(.unplanned) }
        // The wait counts from before the plan (a change-aware route's fetches), not from its end.
        let wait = max(settings.answerWithin - (ContinuousClock.now - started), settings.answerWithin / 10)
        switch await engine.deliver(record, plan: plan, origin: origin, wait: wait, onDisk: onDisk, logger: logger) {
        case .settled(let reports, let duplicate): return settled(record, reports, duplicate: duplicate, logger: logger)
        case .conflict(let key): return .notStarted(.conflict(key))
        case .saturated: return .notStarted(.saturated)
        case .stopping: return .notStarted(.stopping)
        case .pending(let delivery, let retryAfter):
            switch admission.keep(delivery, logger: logger) {
            case .notKept: return .underWay(retryAfter: retryAfter)
            case .settled(let reports): return settled(record, reports, duplicate: false, logger: logger)
            case .kept:
                noteRelayed(record, logger: logger)
                return .kept(here: true)
            }
        }
    }

    /// Whether a request's version is far beyond any the project is known to have relayed, and not one Remote Config
    /// lists (``VersionCheck``): relayed, but moving no mark.
    private func isOutlier(_ record: EventRecord, in configuration: RelayConfiguration, logger: Logger) async -> Bool {
        let number = record.version.versionNumber
        guard let pipeline = configuration.projects[record.project] else { return false }
        let known = await marks.known(record.project, beside: number)
        return await versions.isOutlier(
            number, known: known, project: record.project, pipeline: pipeline, settings: configuration.settings, logger: logger)
    }

    /// Admission, in a span of its own (`admit`); nil when the store did not answer.
    private func admit(_ record: EventRecord, window: Duration, logger: Logger) async -> Admitted? {
        await Traces.withSpan("admit") { span in
            span?.attributes["rc_relay.project"] = record.project
            span?.attributes["rc_relay.version"] = record.version.versionNumber
            do {
                let admitted = try await admission.admit(record, window: window, logger: logger)
                span?.attributes["rc_relay.admission"] = admitted.name
                return admitted
            } catch {
                span?.setStatus(SpanStatus(code: .error, message: "store unavailable"))
                return nil
            }
        }
    }

    /// A settled delivery: relayed, so the mark moves, unless a ping ran out of retries (the version is not relayed
    /// until a retry delivers it).
    private func settled(_ record: EventRecord, _ reports: [DeliveryReport], duplicate: Bool, logger: Logger) -> Outcome {
        if !reports.contains(where: \.unfinished) { noteRelayed(record, logger: logger) }
        return .settled(reports, duplicate: duplicate)
    }

    /// An outlier (docs/webhook.md, version numbers) is relayed but moves no mark.
    private func noteRelayed(_ record: EventRecord, logger: Logger) {
        guard record.outlier != true else { return }
        marks.relayed(record.project, record.version.versionNumber, logger: logger)
    }
}
