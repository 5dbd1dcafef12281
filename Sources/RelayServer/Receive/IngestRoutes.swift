import DeliveryEngine
import Hummingbird
import Logging

/// `POST /webhooks/remote-config` and `POST /pubsub/remote-config`, served straight on Hummingbird: intake verifies
/// the bytes as received, the controller routes and delivers, and the answer is written once. `openapi.yaml`
/// documents both (the generator skips them, see `openapi-generator-config.yaml`); the conformance tests hold their
/// answers to it.
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
        do throws(Refusal) {
            let verified = try await intake.verify(request, ingest: ingest, logger: info?.logger ?? Logger(label: "rc-relay"))
            switch try await controller.relay(verified, requestID: requestID) {
            case .delivered(let body): return Self.json(body, status: .ok)
            case .inProgress(let body): return Self.json(body, status: .accepted)
            }
        } catch {
            return error.response(requestID: requestID)
        }
    }

    private static func json(_ body: [UInt8], status: HTTPResponse.Status) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
}
