import Hummingbird
import NIOCore
import Yardstick

// The reference point, rebuilt so the benchmark measures it in the same run as rc-relay: a bare
// Hummingbird + AsyncHTTPClient relay that does only the minimum for a webhook (read the body, check the Standard
// Webhooks HMAC, parse the version, one POST to messages:send with a fixed token, answer). No replay window, routing,
// retries, deduplication, spool, logs, metrics, read timeout, or bound on the caller's wait. A yardstick.
//
// Usage: bare-relay <port> <emulator URL> <access token> <whsec_ secret> [<CA file>]
let yardstick = Yardstick(name: "bare-relay")
let client = yardstick.client()

let router = Router()
router.get("/healthz") { _, _ in "ok" }
// The floor for refusing: a route that answers 401 and does nothing else (scripts/bench --flood).
router.post("/refuse") { _, _ -> Response in throw HTTPError(.unauthorized) }
router.post("/webhooks/remote-config") { request, _ -> Response in
    let version = try await yardstick.verifiedVersion(request)
    let response = try await client.execute(yardstick.send(version), timeout: .seconds(10))
    let answer = try await response.body.collect(upTo: 1 << 16)
    guard response.status == .ok else { throw HTTPError(.badGateway) }
    return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: answer))
}
let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: yardstick.port)),
    onServerRunning: { channel in yardstick.announce("bare-relay", port: channel.localAddress?.port) })
try await app.runService()
