import DeliveryEngine
import FCMClient
import Foundation
import NIOConcurrencyHelpers
import OpenAPIRuntime
import RelayStore

/// One readiness check's result.
struct ReadinessCheck: Sendable, Encodable {
    var name: String
    var ok: Bool
    var detail: String
}

/// `/healthz`, `/readyz` and `/metrics`.
///
/// Readiness is asked by anyone who can reach the listener, so it costs little and tells little: the token checks run
/// at most once per `server.readinessCacheSeconds` (failures are reused too, so a flood of probes makes no token
/// requests), and the unauthenticated answer names no project and carries no upstream error text. The admin API's
/// `GET /admin/info` and the log have the details.
struct Probes: Sendable {
    let configuration: ConfigurationStore
    let drain: DrainState
    let engine: DeliveryEngine
    let metrics: RelayMetrics
    /// How long the token check may take before it counts as failed (a probe must answer quickly).
    var tokenCheckTimeout: Duration = .seconds(3)
    let tokenChecks: CachedResult<[ReadinessCheck]>
    /// Where events are kept and who delivers: a shared store adds its own check (reachable, or not ready).
    let admission: any Admission
    /// Bounds the checks' waits (the application's clock, whose deadline sweep every part shares).
    let clock: any DeliveryClock

    init(
        configuration: ConfigurationStore, drain: DrainState, engine: DeliveryEngine, metrics: RelayMetrics, cacheFor lifetime: Duration,
        admission: any Admission, clock: any DeliveryClock
    ) {
        (self.configuration, self.drain, self.engine, self.metrics) = (configuration, drain, engine, metrics)
        (self.admission, self.clock) = (admission, clock)
        self.tokenChecks = CachedResult(lifetime: lifetime, clock: clock)
    }

    /// Every check with its details (the admin API's view): configuration loaded, a token obtainable per project (a
    /// cached one counts), not draining, queue not saturated, acknowledged events not yet accepted by FCM.
    /// The configuration check is informational: a refused reload keeps the running configuration, which stays good.
    func readiness() async -> [ReadinessCheck] {
        let configuration = configuration.current
        var checks = [
            ReadinessCheck(
                name: "configuration", ok: true,
                detail: "loaded \(configuration.loadedAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))")
        ]
        checks += await tokenChecks.value { await self.tokens(configuration) }
        let draining = drain.isDraining
        checks.append(.init(name: "draining", ok: !draining, detail: draining ? "draining after a stop signal" : "serving"))
        if let store = admission.readiness {
            checks.append(.init(name: "store", ok: store.ok, detail: store.detail))
        }
        let depth = engine.queueDepth
        let limit = engine.settings.maxInFlight  // fixed at start: a reload does not change it
        checks.append(.init(name: "queue", ok: depth < limit, detail: "\(depth) of \(limit) pings queued"))
        // Informational, as configuration is: FCM's outage is not this replica's, and the events are safe on disk.
        let parked = engine.parked
        checks.append(
            .init(
                name: "undelivered", ok: true,
                detail: parked == 0
                    ? "no acknowledged event waits for FCM"
                    : "\(parked) acknowledged event(s) wait for FCM, kept and tried again every \(engine.settings.parkedRetryInterval)"))
        metrics.ready.record(checks.allSatisfy(\.ok) ? 1 : 0)
        return checks
    }

    /// The unauthenticated view: the per-project token checks become one `credentials` check, without project names
    /// or error text.
    static func publicView(of checks: [ReadinessCheck]) -> [ReadinessCheck] {
        let tokens = checks.filter { $0.name.hasPrefix("token:") }
        let failing = tokens.filter { !$0.ok }.count
        let credentials = ReadinessCheck(
            name: "credentials", ok: failing == 0,
            detail: failing == 0
                ? "an access token for each of \(tokens.count) project(s)"
                : "no access token for \(failing) of \(tokens.count) project(s); GET /admin/info and the log say why")
        var view = checks.filter { !$0.name.hasPrefix("token:") }.map { check in
            // The store's detail names projects and the database's errors: the admin API has them.
            guard check.name == "store" else { return check }
            return ReadinessCheck(
                name: "store", ok: check.ok,
                detail: check.ok ? "the shared store is reachable" : "the shared store is unreachable; GET /admin/info and the log say why"
            )
        }
        view.insert(credentials, at: min(1, view.count))
        return view
    }

    /// A check per project, but a token asked once per set of credentials: projects with the same credentials share
    /// one token source, so 10,000 projects on one service account cost one check, not 10,000 tasks (issue #52).
    private func tokens(_ configuration: RelayConfiguration) async -> [ReadinessCheck] {
        var shared: [ObjectIdentifier: (source: CachingTokenSource, projects: [String])] = [:]
        for id in configuration.projects.ids {
            guard let source = configuration.projects[id]?.tokenSource else { continue }
            shared[ObjectIdentifier(source), default: (source, [])].projects.append(id)
        }
        let outcomes = await withTaskGroup(of: (ObjectIdentifier, ok: Bool, detail: String).self) { group in
            for (key, entry) in shared {
                group.addTask {
                    let check = await tokenCheck(source: entry.source)
                    return (key, check.ok, check.detail)
                }
            }
            return await group.reduce(into: [ObjectIdentifier: (ok: Bool, detail: String)]()) { $0[$1.0] = ($1.ok, $1.detail) }
        }
        var checks: [ReadinessCheck] = []
        for (key, entry) in shared {
            guard let outcome = outcomes[key] else { continue }
            checks += entry.projects.map { ReadinessCheck(name: "token:\($0)", ok: outcome.ok, detail: outcome.detail) }
        }
        return checks.sorted { $0.name < $1.name }
    }

    private func tokenCheck(source: CachingTokenSource) async -> (ok: Bool, detail: String) {
        let check = Settlement<Result<Bool, TokenError>>()
        Task {
            do throws(TokenError) {
                let cached = source.hasFreshToken
                _ = try await source.token()
                check.settle(.success(cached))
            } catch {
                check.settle(.failure(error))
            }
        }
        switch await check.value(within: tokenCheckTimeout, on: clock) {
        case .success(let cached)?: return (true, cached ? "cached" : "obtained")
        case .failure(let error)?: return (false, "no access token: \(error)")
        case nil: return (false, "no access token within \(tokenCheckTimeout)")
        }
    }

    /// The exposition, with `rc_relay_ready` as of this scrape (the cached checks count): current wherever rc-relay
    /// runs, probed by an orchestrator or not.
    func metrics() async -> HTTPBody {
        _ = await readiness()
        return HTTPBody(metrics.exposition())
    }
}

/// A value computed at most once per `lifetime`, shared by concurrent callers while it is computed.
final class CachedResult<Value: Sendable>: Sendable {
    let lifetime: Duration
    private struct State {
        var value: Value?
        var at: ContinuousClock.Instant?
        var inFlight: Settlement<Value>?
    }
    private let state = NIOLockedValueBox(State())

    /// Bounds a waiter's wait.
    let clock: any DeliveryClock

    init(lifetime: Duration, clock: any DeliveryClock) { (self.lifetime, self.clock) = (lifetime, clock) }

    private enum Step {
        case cached(Value)
        case join(Settlement<Value>)
        case compute(Settlement<Value>)
    }

    func value(_ compute: @Sendable () async -> Value) async -> Value {
        let now = ContinuousClock.now
        let step = state.withLockedValue { state -> Step in
            if let value = state.value, let at = state.at, now - at < lifetime { return .cached(value) }
            if let inFlight = state.inFlight { return .join(inFlight) }
            let settlement = Settlement<Value>()
            state.inFlight = settlement
            return .compute(settlement)
        }
        switch step {
        case .cached(let value):
            return value
        case .join(let settlement):
            // The computation is bounded by its own timeout; this bound only keeps a waiter from hanging forever.
            if let value = await settlement.value(within: .seconds(60), on: clock) { return value }
            return await compute()
        case .compute(let settlement):
            let value = await compute()
            state.withLockedValue { state in
                state.value = value
                state.at = ContinuousClock.now
                state.inFlight = nil
            }
            settlement.settle(value)
            return value
        }
    }
}
