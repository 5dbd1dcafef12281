import DeliveryEngine
import FCMClient
import Foundation
import NIOCore

/// The FCM client as the engine's ``MessageSender``: FCM's answers in the engine's terms (``SendFailure``).
struct FCMMessageSender: MessageSender {
    let sender: FCMSender

    func send(project: String, message: ByteBuffer, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String {
        do {
            return try await sender.send(project: project, message: message, validateOnly: validateOnly, beforeRequest: beforeRequest)
        } catch {
            throw SendFailure(error)
        }
    }
}

extension SendFailure {
    init(_ error: FCMError) {
        switch error {
        case .rejected(let answer): self = .rejected(.init(answer))
        case .transport(let reason): self = .transport(reason)
        case .token(let token): self.init(token)
        case .invalidResponse(let reason): self = .invalidResponse(reason)
        case .withheld(let reason): self = .withheld(reason)
        }
    }

    init(_ error: TokenError) {
        if case .refused(let status, _, _) = error {
            self = .credentials("\(error)", status: status)
        } else {
            self = .credentials("\(error)", status: nil)
        }
    }
}

extension SendFailure.Rejection {
    init(_ answer: FCMErrorResponse) {
        self.init(
            httpStatus: answer.httpStatus, status: answer.status, errorCode: answer.errorCode, message: answer.message,
            retryAfter: answer.retryAfter)
    }
}

extension RetryPolicy {
    /// The decision after a Remote Config call failed: FCM's rules, since both are Google APIs answering alike. An
    /// answer too large to read is permanent (it would be as large again).
    func decision(
        afterRemoteConfig error: RemoteConfigError, attempt: Int, now: Date = Date(), random: () -> Double = { Double.random(in: 0...1) }
    ) -> Decision {
        switch error {
        case .rejected(let answer): decision(after: .rejected(.init(answer)), attempt: attempt, now: now, random: random)
        case .token(let token): decision(after: SendFailure(token), attempt: attempt, now: now, random: random)
        case .transport(let reason): decision(after: .transport(reason), attempt: attempt, now: now, random: random)
        case .invalidResponse(let reason): decision(after: .invalidResponse(reason), attempt: attempt, now: now, random: random)
        case .tooLarge: .permanent
        }
    }
}
