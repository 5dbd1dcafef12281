import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import Yardstick

// The fair floor (issue #35): the bare relay plus exactly the guarantees any production relay owes, and nothing of
// rc-relay's own. Beside the bare relay's minimum:
// - an access line and a decision line per webhook, through swift-log at `info`, to standard output (as rc-relay's);
// - AsyncHTTPClient with a read timeout (10 s) as well as the request's deadline;
// - the FCM send in a task of its own and a bounded wait for it: a task group races the send against a 10 s timer,
//   and past it the caller is answered 202 while the send goes on.
//
// Usage: fair-floor <port> <emulator URL> <access token> <whsec_ secret> [<CA file>]
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardOutput(label: label)
    handler.logLevel = .info
    return handler
}
let logger = Logger(label: "fair-floor")
let yardstick = Yardstick(name: "fair-floor")
let client = yardstick.client(timeout: .init(connect: .seconds(5), read: .seconds(10)))
let answerWithin = Duration.seconds(10)

/// How the caller's wait for the send ended.
enum Waited: Sendable {
    case answered(status: UInt, body: ByteBuffer)
    case failed
    case stillSending
}

/// The send, in a task of its own: it goes on when the caller's wait is over.
func sendOnItsOwn(_ version: String) -> Task<Waited, Never> {
    Task {
        do {
            let response = try await client.execute(yardstick.send(version), timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 16)
            return .answered(status: response.status.code, body: body)
        } catch {
            return .failed
        }
    }
}

let router = Router()
router.get("/healthz") { _, _ in "ok" }
router.post("/refuse") { _, _ -> Response in throw HTTPError(.unauthorized) }
router.post("/webhooks/remote-config") { request, _ -> Response in
    let started = ContinuousClock.now
    let status: HTTPResponse.Status
    let response: Response
    do {
        let version = try await yardstick.verifiedVersion(request)
        let send = sendOnItsOwn(version)
        let waited = await withTaskGroup(of: Waited.self) { group in
            group.addTask { await send.value }
            group.addTask {
                try? await Task.sleep(for: answerWithin)
                return .stillSending
            }
            let first = await group.next() ?? .stillSending
            group.cancelAll()
            return first
        }
        switch waited {
        case .answered(let answer, let body) where answer == 200:
            logger.info("webhook delivered", metadata: ["version": "\(version)", "status": "200"])
            response = Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        case .stillSending:
            logger.info("webhook accepted; the send goes on", metadata: ["version": "\(version)", "status": "202"])
            response = Response(status: .accepted)
        case .answered, .failed:
            logger.info("webhook not delivered", metadata: ["version": "\(version)", "status": "502"])
            response = Response(status: .badGateway)
        }
        status = response.status
    } catch {
        logger.info("webhook refused", metadata: ["error": "\(error)"])
        status = .unauthorized
        response = Response(status: .unauthorized)
    }
    logger.info(
        "request",
        metadata: [
            "method": "POST", "path": "/webhooks/remote-config", "status": "\(status.code)",
            "duration_ms": "\((ContinuousClock.now - started) / .milliseconds(1))",
        ])
    return response
}
let app = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: yardstick.port)),
    onServerRunning: { channel in yardstick.announce("fair-floor", port: channel.localAddress?.port) })
try await app.runService()
