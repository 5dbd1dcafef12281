import DeliveryEngine
import FCMClient
import Foundation
import NIOCore
import RelayCore

/// The FCM client as the engine's ``MessageSender``: FCM's answers classified by FCM's retry rules
/// (``SendFailure/init(_:now:)``), which live here and nowhere in the engine.
struct FCMMessageSender: MessageSender {
    let sender: FCMSender
    /// The wall clock a `Retry-After` date is read against.
    var now: @Sendable () -> Date = { Date() }

    static let service = "FCM"
    var service: String { Self.service }

    /// FCM's documented error codes (and Google's canonical statuses it answers with); a metric counts any other as `other`.
    static let errorCodes: Set<String> = [
        "UNSPECIFIED_ERROR", "INVALID_ARGUMENT", "UNREGISTERED", "SENDER_ID_MISMATCH", "QUOTA_EXCEEDED", "UNAVAILABLE",
        "INTERNAL", "THIRD_PARTY_AUTH_ERROR", "PERMISSION_DENIED", "NOT_FOUND", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED",
    ]
    var errorCodes: Set<String> { Self.errorCodes }

    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        guard case .fcm(let message) = payload else {
            throw SendFailure(.permanent, "FCM sends FCM messages only, and this ping carries a call to route \(payload.audience.name)'s HTTP target")
        }
        do {
            return try await sender.send(
                project: project, message: ByteBuffer(bytes: message.json), validateOnly: validateOnly, beforeRequest: beforeRequest)
        } catch {
            throw SendFailure(error, now: now())
        }
    }
}

/// FCM's retry rules (facts.md: FCM's error codes): a `429` is the project's quota, spent (throttled: every ping of the
/// project slows down, and the wait starts at `delivery.quotaDelaySeconds`); a `408`, a `5xx`, a timeout, no connection
/// or an unreadable answer may work later (transient); `400`, `403`, `404`, `THIRD_PARTY_AUTH_ERROR` and a `401` after
/// the client's one refresh never will (permanent). Remote Config answers alike: both are Google APIs.
extension SendFailure {
    init(_ error: FCMError, now: Date) {
        switch error {
        case .rejected(let answer): self.init(rejected: answer, now: now)
        case .transport(let reason): self.init(.transient, "FCM could not be reached: \(reason)")
        case .token(let token): self.init(token)
        case .invalidResponse(let reason): self.init(.transient, "FCM's answer is not usable: \(reason)")
        case .withheld(let reason): self = .withheld(reason)
        }
    }

    init(rejected answer: FCMErrorResponse, now: Date) {
        let kind: Kind =
            switch answer.httpStatus {
            case 429: .throttled
            case 408, 500...599: .transient
            default: .permanent  // 400, 401 after a refresh, 403, 404, THIRD_PARTY_AUTH_ERROR
            }
        let description =
            "FCM answered \(answer.httpStatus)" + ((answer.errorCode ?? answer.status).map { " \($0)" } ?? "")
            + (answer.message.map { ": \($0)" } ?? "")
        self.init(
            kind, description, httpStatus: answer.httpStatus, errorCode: answer.errorCode ?? answer.status,
            retryAfter: RetryPolicy.retryAfter(answer.retryAfter, now: now))
    }

    /// No access token: permanent when the token endpoint refused the key itself (a status other than 408, 429 or a
    /// 5xx), else transient.
    init(_ error: TokenError) {
        var kind = Kind.transient
        if case .refused(let status, _, _) = error, status != 408, status != 429, status < 500 { kind = .permanent }
        self.init(kind, "no access token: \(error)")
    }
}

extension RetryPolicy {
    /// The decision after a Remote Config call failed: FCM's rules, since both are Google APIs answering alike. An
    /// answer too large to read is permanent (it would be as large again).
    func decision(
        afterRemoteConfig error: RemoteConfigError, attempt: Int, now: Date = Date(), random: () -> Double = { Double.random(in: 0...1) }
    ) -> Decision {
        switch error {
        case .rejected(let answer): decision(after: SendFailure(rejected: answer, now: now), attempt: attempt, random: random)
        case .token(let token): decision(after: SendFailure(token), attempt: attempt, random: random)
        case .transport(let reason): decision(after: SendFailure(.transient, reason), attempt: attempt, random: random)
        case .invalidResponse(let reason): decision(after: SendFailure(.transient, reason), attempt: attempt, random: random)
        case .tooLarge: .permanent
        }
    }
}
