import Foundation
import OpenAPIRuntime

/// The server side of `openapi.yaml` (all but the two ingest operations, which ``IngestRoutes`` serves): each
/// operation hands over to the part that does the work. Problems are thrown as ``Refusal``s and rendered by
/// ``ProblemMiddleware``.
struct RelayAPI: APIProtocol {
    let probes: Probes
    let admin: AdminController

    // MARK: Probes

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        .ok(.init(body: .json(.init(status: .ok, version: RelayApplication.version))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        let detailed = await probes.readiness()
        let checks = Probes.publicView(of: detailed)
        let failing = checks.filter { !$0.ok }
        guard failing.isEmpty else {
            // The log has the details the answer leaves out (which project, what the token endpoint said).
            let details = detailed.filter { !$0.ok }.map { "\($0.name): \($0.detail)" }.joined(separator: "; ")
            var refusal = Refusal(
                kind: .notReady, detail: "failing: " + failing.map { "\($0.name) (\($0.detail))" }.joined(separator: "; "), checks: checks)
            // At `notice`, not at the `warning` of a webhook turned away: a probe asks every few seconds.
            RequestInfo.current?.logger.notice(
                "not ready",
                metadata: [
                    "status": "\(refusal.kind.status.code)", "problem": "\(refusal.kind.rawValue)", "reason": "\(refusal.detail)",
                    "failing": "\(details)",
                ])
            refusal.isLogged = true
            throw refusal
        }
        return .ok(.init(body: .json(.init(status: .ready, checks: checks.map { .init(name: $0.name, ok: $0.ok, detail: $0.detail) }))))
    }

    func getMetrics(_ input: Operations.GetMetrics.Input) async throws -> Operations.GetMetrics.Output {
        .ok(.init(body: .plainText(await probes.metrics())))
    }

    // MARK: Admin

    func getInfo(_ input: Operations.GetInfo.Input) async throws -> Operations.GetInfo.Output {
        var info = admin.info()
        info.checks = await probes.readiness().map { .init(name: $0.name, ok: $0.ok, detail: $0.detail) }
        return .ok(.init(body: .json(info)))
    }

    func getSchedules(_ input: Operations.GetSchedules.Input) async throws -> Operations.GetSchedules.Output {
        .ok(.init(body: .json(.init(admin.engine.schedules))))
    }

    func listRoutes(_ input: Operations.ListRoutes.Input) async throws -> Operations.ListRoutes.Output {
        .ok(.init(body: .json(admin.routes())))
    }

    func listDeliveries(_ input: Operations.ListDeliveries.Input) async throws -> Operations.ListDeliveries.Output {
        .ok(.init(body: .json(try await admin.deliveries(input.query))))
    }

    func getDelivery(_ input: Operations.GetDelivery.Input) async throws -> Operations.GetDelivery.Output {
        .ok(.init(body: .json(try await admin.delivery(input.path.id))))
    }

    func retryDelivery(_ input: Operations.RetryDelivery.Input) async throws -> Operations.RetryDelivery.Output {
        .ok(.init(body: .json(try await admin.retry(input.path.id))))
    }

    func discardDelivery(_ input: Operations.DiscardDelivery.Input) async throws -> Operations.DiscardDelivery.Output {
        switch try await admin.discard(input.path.id) {
        case .here(let record): .ok(.init(body: .json(record)))
        case .passedOn(let record): .accepted(.init(body: .json(record)))
        }
    }

    func resetMarks(_ input: Operations.ResetMarks.Input) async throws -> Operations.ResetMarks.Output {
        .ok(.init(body: .json(try await admin.resetMarks(input.path.project))))
    }

    func reloadConfiguration(_ input: Operations.ReloadConfiguration.Input) async throws -> Operations.ReloadConfiguration.Output {
        .ok(.init(body: .json(try await admin.reload())))
    }
}
