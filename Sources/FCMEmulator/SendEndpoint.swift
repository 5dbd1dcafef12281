import Foundation
import Hummingbird

/// FCM HTTP v1 `messages:send`: a token this emulator issued, FCM's message rules, injected faults.
struct SendEndpoint {
    let state: EmulatorState

    func handle(_ request: Request, context: EmulatorContext, project: String) async throws -> Response {
        let body = try await request.body.collect(upTo: 1024 * 1024)
        await state.beginSend()
        let response = await respond(to: request, body: body, context: context, project: project)
        await state.endSend()
        return response
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
        guard token.project == project else {
            return GoogleErrors.fcm(
                403, status: "PERMISSION_DENIED", message: "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
        }
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
            return GoogleErrors.invalidArgument("Invalid JSON payload received.")
        }
        if let problem = MessageRules.problem(in: parsed) { return GoogleErrors.invalidArgument(problem) }
        let validateOnly = (parsed["validate_only"] ?? parsed["validateOnly"]) as? Bool ?? false
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
