import DeliveryEngine
import Hummingbird
import Logging
import Tracing

/// `POST /webhooks/remote-config` and `POST /pubsub/remote-config`, served straight on Hummingbird: intake verifies
/// the bytes as received, the controller routes and delivers, and the answer is written once. `openapi.yaml`
/// documents both (the generator skips them, see `openapi-generator-config.yaml`); the conformance tests hold their
/// answers to it. Each request is a span (``RequestSpan``), drawn once intake knows its parent.
struct IngestRoutes: Sendable {
    let intake: WebhookIntake
    let controller: WebhookController

    func register(on router: Router<RelayRequestContext>) {
        router.post("/webhooks/remote-config") { request, _ in await answer(request, ingest: .webhook) }
        router.post("/pubsub/remote-config") { request, _ in await answer(request, ingest: .pubSub) }
    }

    private func answer(_ request: Request, ingest: WebhookIntake.Ingest) async -> Response {
        let info = RequestInfo.current
        let requestID = info?.id ?? ""
        var stages = IntakeStages()
        var verified: VerifiedEvent
        do throws(Refusal) {
            verified = try await intake.verify(request, ingest: ingest, logger: info?.logger ?? Logger(label: "rc-relay"), stages: &stages)
        } catch {
            return await RequestSpan.run(request, stages: stages, refused: error) { _ in error.response(requestID: requestID) }
        }
        return await RequestSpan.run(request, stages: stages, event: verified) { span in
            if let trace = Traces.traceID(of: span?.context) { verified.logger[metadataKey: "trace_id"] = "\(trace)" }
            do throws(Refusal) {
                switch try await controller.relay(verified, requestID: requestID) {
                case .delivered(let body): return Self.json(body, status: .ok)
                case .inProgress(let body): return Self.json(body, status: .accepted)
                }
            } catch {
                span?.attributes["rc_relay.problem"] = error.kind.rawValue
                return error.response(requestID: requestID)
            }
        }
    }

    private static func json(_ body: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
