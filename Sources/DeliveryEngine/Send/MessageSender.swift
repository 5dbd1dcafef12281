import NIOCore

/// The seam between the engine and a push service: send one encoded message, get its name back, or why not. The engine
/// knows the service by this alone; `RelayServer` adapts the FCM client to it.
public protocol MessageSender: Sendable {
    /// `beforeRequest` is asked right before each request leaves (after credentials are in hand, and again before a
    /// retry the sender makes of its own): a reason not to send ends the send with ``SendFailure/withheld(_:)``.
    func send(project: String, message: ByteBuffer, validateOnly: Bool, beforeRequest: RequestGate) async throws(SendFailure) -> String
}

/// Asked right before a request leaves: nil to send it, or why it must not.
public typealias RequestGate = @Sendable () async -> String?

extension MessageSender {
    /// A send that nothing holds back.
    public func send(project: String, message: ByteBuffer, validateOnly: Bool) async throws(SendFailure) -> String {
        try await send(project: project, message: message, validateOnly: validateOnly, beforeRequest: { nil })
    }
}

/// Why a send did not succeed, in the terms the engine's retry rules and reports need.
public enum SendFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The service answered with an error status.
    case rejected(Rejection)
    /// It could not be reached, or did not answer in time.
    case transport(String)
    /// No credentials could be had: why, and the token endpoint's HTTP status when it answered one.
    case credentials(String, status: Int?)
    /// It answered 200 without a message name.
    case invalidResponse(String)
    /// No request left: the gate said why (the replica lost the project while it waited for credentials).
    case withheld(String)

    /// An error answer: `{"error": {"code", "message", "status", "details": [{"errorCode"}]}}` as Google writes it.
    public struct Rejection: Sendable, Equatable {
        /// The HTTP status.
        public var httpStatus: Int
        /// Google's canonical status, such as `INVALID_ARGUMENT`.
        public var status: String?
        /// The service's own error code, such as `UNREGISTERED` or `QUOTA_EXCEEDED`.
        public var errorCode: String?
        /// The message, as sent.
        public var message: String?
        /// The `Retry-After` header, as sent.
        public var retryAfter: String?

        public init(httpStatus: Int, status: String? = nil, errorCode: String? = nil, message: String? = nil, retryAfter: String? = nil) {
            (self.httpStatus, self.status, self.errorCode, self.message, self.retryAfter) = (httpStatus, status, errorCode, message, retryAfter)
        }
    }

    public var description: String {
        switch self {
        case .rejected(let answer):
            "FCM answered \(answer.httpStatus)" + ((answer.errorCode ?? answer.status).map { " \($0)" } ?? "")
                + (answer.message.map { ": \($0)" } ?? "")
        case .transport(let reason): "FCM could not be reached: \(reason)"
        case .credentials(let reason, _): "no access token: \(reason)"
        case .invalidResponse(let reason): "FCM's answer is not usable: \(reason)"
        case .withheld(let reason): "not sent: \(reason)"
        }
    }
}
