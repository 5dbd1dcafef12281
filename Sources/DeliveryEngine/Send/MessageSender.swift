import NIOCore
import RelayCore

/// The seam between the engine and a destination: send one encoded message, get its name back, or why not, already
/// classified by the sender's own rules (``SendFailure/Kind``). The engine knows the destination by this alone;
/// `RelayServer` adapts each client to it (`Deliver/`), and the destination's retry rules live there.
public protocol MessageSender: Sendable {
    /// What it sends to, as logs, spans and metrics name it: `ping accepted by <service>`, the `<service> send` span,
    /// `rc_relay_<service>_attempts_total`, and the log's `<service>_message` (lowercased in names).
    var service: String { get }
    /// The error codes the destination documents: a metric's `error_code` label names these and counts any other as
    /// `other`, so a destination cannot grow the label's values.
    var errorCodes: Set<String> { get }
    /// Where its requests are paced: nil for the project's pace (`delivery.messagesPerSecond`), else a key and a rate
    /// of its own (an HTTP target's host).
    var pace: (key: String, rate: Double)? { get }
    /// Sends what a ping carries, encoded by the sender's own rules. `beforeRequest` is asked right before each request
    /// leaves (after credentials are in hand, and again before a retry the sender makes of its own): a reason not to
    /// send ends the send with a ``SendFailure/Kind/withheld``.
    func send(_ payload: PingPayload, project: String, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String
}

/// Asked right before a request leaves: nil to send it, or why it must not.
public typealias RequestGate = @Sendable () async -> String?

extension MessageSender {
    public var errorCodes: Set<String> { [] }
    public var pace: (key: String, rate: Double)? { nil }

    /// A send that nothing holds back.
    public func send(_ payload: PingPayload, project: String, validateOnly: Bool) async throws(SendFailure) -> String {
        try await send(payload, project: project, validateOnly: validateOnly, beforeRequest: { nil })
    }

    /// The service as metric names and log keys have it: lowercased, letters, digits and `_` only (`Push Service` →
    /// `pushservice`).
    var keyName: String { DeliveryMetrics.keyName(service) }
}

/// Why a send did not succeed: what the engine does next (``kind``, decided by the sender's rules), and what the
/// history and the answer keep of it.
public struct SendFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// What the engine does after it, by ``RetryPolicy``.
    public enum Kind: Sendable, Equatable {
        /// It may work later (a server error, a timeout, no connection, an unreadable answer): backed off with jitter.
        case transient
        /// The destination's quota is spent: the project's pace is halved, and the wait starts at the policy's
        /// `quotaDelay` and doubles with each attempt.
        case throttled
        /// The same request would be refused again: never retried.
        case permanent
        /// No request left: the gate (``RequestGate``) said why.
        case withheld
    }

    public var kind: Kind
    /// Why, in the destination's terms, as the log and the history say it.
    public var description: String
    /// The HTTP status the destination answered; nil when no answer came.
    public var httpStatus: Int?
    /// The destination's own error code, such as `UNAVAILABLE`.
    public var errorCode: String?
    /// How long the destination asked to wait (`Retry-After`): never undercut.
    public var retryAfter: Duration?

    public init(_ kind: Kind, _ description: String, httpStatus: Int? = nil, errorCode: String? = nil, retryAfter: Duration? = nil) {
        (self.kind, self.description, self.httpStatus, self.errorCode, self.retryAfter) = (kind, description, httpStatus, errorCode, retryAfter)
    }

    /// No request left, and why (the reason alone: the ping's log line says `ping not sent: <reason>`).
    public static func withheld(_ reason: String) -> SendFailure { SendFailure(.withheld, reason) }
}
