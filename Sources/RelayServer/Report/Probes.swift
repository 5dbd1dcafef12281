import FCMClient
import Foundation
import OpenAPIRuntime

/// One readiness check's result.
struct ReadinessCheck: Sendable, Encodable {
    var name: String
    var ok: Bool
    var detail: String
}

/// `/healthz`, `/readyz` and `/metrics`.
struct Probes: Sendable {
    let runtime: RelayRuntime
    /// How long the token check may take before it counts as failed (a probe must answer quickly).
    var tokenCheckTimeout: Duration = .seconds(3)

    /// Configuration loaded, a token obtainable per project (a cached one counts), not draining, queue not saturated.
    /// The configuration check is informational: a refused reload keeps the running configuration, which stays good.
    func readiness() async -> [ReadinessCheck] {
        let configuration = runtime.configuration
        var checks = [
            ReadinessCheck(
                name: "configuration", ok: true,
                detail: "loaded \(configuration.loadedAt.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))")
        ]
        let tokens = await withTaskGroup(of: ReadinessCheck.self) { group in
            for id in configuration.projects.ids {
                guard let source = configuration.projects[id]?.tokenSource else { continue }
                group.addTask { await tokenCheck(project: id, source: source) }
            }
            return await group.reduce(into: [ReadinessCheck]()) { $0.append($1) }
        }
        checks += tokens.sorted { $0.name < $1.name }
        let draining = runtime.isDraining
        checks.append(.init(name: "draining", ok: !draining, detail: draining ? "draining after a stop signal" : "serving"))
        let depth = runtime.metrics.queueDepth
        let limit = configuration.settings.maxQueuedPings
        checks.append(.init(name: "queue", ok: depth < limit, detail: "\(depth) of \(limit) pings queued"))
        runtime.metrics.ready.record(checks.allSatisfy(\.ok) && !runtime.isDraining ? 1 : 0)
        return checks
    }

    private func tokenCheck(project: String, source: CachingTokenSource) async -> ReadinessCheck {
        let name = "token:\(project)"
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
        switch await check.value(within: tokenCheckTimeout) {
        case .success(let cached)?: return .init(name: name, ok: true, detail: cached ? "cached" : "obtained")
        case .failure(let error)?: return .init(name: name, ok: false, detail: "no access token: \(error)")
        case nil: return .init(name: name, ok: false, detail: "no access token within \(tokenCheckTimeout)")
        }
    }

    /// The exposition, with `rc_relay_ready` as of this scrape: the readiness checks run first, so the gauge is
    /// current wherever rc-relay runs, probed by an orchestrator or not.
    func metrics() async -> HTTPBody {
        _ = await readiness()
        return HTTPBody(runtime.metrics.exposition())
    }
}
