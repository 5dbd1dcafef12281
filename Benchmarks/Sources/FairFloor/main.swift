import AsyncHTTPClient
import Foundation
import HTTPTypes
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
// With FAIR_FLOOR_POSTGRES set, it is the store floor as well (StoreFloor.swift): each event committed before the
// answer, and settled once FCM accepts it.
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
let store = try ProcessInfo.processInfo.environment["FAIR_FLOOR_POSTGRES"].map { try StoreFloor(url: $0, logger: logger) }
try await store?.start()

/// How the caller's wait for the send ended.
enum Waited: Sendable {
    case answered(status: UInt, body: ByteBuffer)
    case failed
    case stillSending
}

/// The send, in a task of its own: it goes on when the caller's wait is over. With a store, the event is settled once
/// FCM accepts it.
func sendOnItsOwn(_ version: String, key: String) -> Task<Waited, Never> {
    Task {
        do {
            let response = try await client.execute(yardstick.send(version), timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 16)
            if response.status == .ok { store?.settled(key) }
            return .answered(status: response.status.code, body: body)
        } catch {
            return .failed
        }
    }
}

/// The answer to a verified webhook, after its decision line.
func relay(_ version: String, key: String) async -> Response {
    if let store {
        do {
            guard try await store.admit(key: key, record: #"{"version":"\#(version)","id":"\#(key)"}"#) else {
                logger.info("webhook already relayed", metadata: ["version": "\(version)", "status": "200"])
                return Response(status: .ok)
            }
        } catch {
            logger.info("webhook not committed", metadata: ["version": "\(version)", "status": "503"])
            return Response(status: .serviceUnavailable)
        }
    }
    let send = sendOnItsOwn(version, key: key)
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
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    case .stillSending:
        logger.info("webhook accepted; the send goes on", metadata: ["version": "\(version)", "status": "202"])
        return Response(status: .accepted)
    case .answered, .failed:
        logger.info("webhook not delivered", metadata: ["version": "\(version)", "status": "502"])
        return Response(status: .badGateway)
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
        let key = request.headers[HTTPField.Name("webhook-id")!] ?? ""
        let version = try await yardstick.verifiedVersion(request)
        response = await relay(version, key: key)
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
