import Foundation
import Hummingbird
import NIOCore
import NIOHTTP2

/// FCM HTTP v1 `messages:send`: a token this emulator issued, FCM's message rules, injected faults.
struct SendEndpoint {
    let state: EmulatorState

    func handle(_ request: Request, context: EmulatorContext, project: String) async throws -> Response {
        let body = try await request.body.collect(upTo: 1024 * 1024)
        // An HTTP/2 request is a stream channel whose parent is the connection (whose parent is the listening socket);
        // an HTTP/1.1 request is served on the connection itself, whose parent is the listening socket.
        let connection = context.channel.parent.flatMap { $0.parent == nil ? nil : $0 } ?? context.channel
        let id = ObjectIdentifier(connection)
        switch await state.beginSend(connection: id, http2: connection !== context.channel) {
        case nil: connection.closeFuture.whenComplete { [state] _ in Task { await state.connectionClosed(id) } }
        case true?: Self.goAway(connection)
        case false?: break
        }
        let response = await respond(to: request, body: body, context: context, project: project)
        await state.endSend()
        return response
    }

    /// Tells the client to open no more streams on the connection, as Google's front ends do to a long-lived one: a
    /// `GOAWAY` whose last stream is the largest possible, so every stream under way finishes and is answered; the
    /// client closes the connection once its streams are done, and opens another.
    ///
    /// Written here rather than with Hummingbird's `maxAgeTimeout`, whose second step closes the connection as its
    /// last stream closes: a response not yet flushed was lost with it (seen as `remoteConnectionClosed` after the
    /// message was recorded), which Google's front ends do not do.
    static func goAway(_ connection: any Channel) {
        let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .maxID, errorCode: .noError, opaqueData: nil))
        connection.writeAndFlush(frame, promise: nil)
    }

    private func respond(to request: Request, body: ByteBuffer, context: EmulatorContext, project: String) async -> Response {
        let fault = await state.nextFault()
        let latency = (fault?.latencyMs ?? 0) + (await state.baseLatencyMs)
        if latency > 0 { try? await Task.sleep(for: .milliseconds(latency)) }
        if fault?.drop == true {
            try? await context.channel.close()
            return Response(status: .internalServerError)  // never written: the connection is gone
        }
        if let fault, let status = fault.status {
            return GoogleErrors.fcm(
                status, status: Self.canonicalStatus(status), message: "Injected fault.", errorCode: fault.errorCode,
                retryAfter: fault.retryAfter)
        }
        guard let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer "),
            let token = await state.token(String(authorization.dropFirst("Bearer ".count)))
        else { return GoogleErrors.unauthenticated }
        guard !token.scopes.isDisjoint(with: Self.scopes) else {
            return GoogleErrors.google(403, status: "PERMISSION_DENIED", message: "Request had insufficient authentication scopes.")
        }
        guard await state.maySend(tokenProject: token.project, for: project) else {
            return GoogleErrors.fcm(
                403, status: "PERMISSION_DENIED", message: "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
        }
        let request: JSONValue
        do {
            request = try JSONParser.parse(Array(buffer: body))
        } catch {
            return GoogleErrors.invalidArgument("Invalid JSON payload received. Unexpected token at byte \(error.offset).")
        }
        do {
            try DiscoveryDocument.fcm.check(request, against: "SendMessageRequest")
        } catch {
            return GoogleErrors.invalidArgument(error.description, violation: error)
        }
        if let problem = MessageRules.problem(in: request) { return GoogleErrors.invalidArgument(problem) }
        if let device = MessageRules.device(in: request), await state.isUnregistered(device) {
            return GoogleErrors.fcm(404, status: "NOT_FOUND", message: "Requested entity was not found.", errorCode: "UNREGISTERED")
        }
        let validateOnly = request["validate_only", "validateOnly"] == .bool(true)
        let name = await state.record(project: project, request: String(buffer: body), validateOnly: validateOnly)
        return GoogleErrors.json(["name": name])
    }

    static let scopes: Set<String> = ["https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform"]

    static func canonicalStatus(_ code: Int) -> String {
        switch code {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 500: "INTERNAL"
        case 503: "UNAVAILABLE"
        default: "UNKNOWN"
        }
    }
}
