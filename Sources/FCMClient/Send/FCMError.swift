/// FCM's error body: `{"error": {"code", "message", "status", "details": [{"@type": "…FcmError", "errorCode"}]}}`.
public struct FCMErrorResponse: Sendable, Equatable {
    /// The HTTP status FCM answered with.
    public var httpStatus: Int
    /// Google's canonical status, such as `INVALID_ARGUMENT`.
    public var status: String?
    /// FCM's own error code from `details`, such as `UNREGISTERED` or `QUOTA_EXCEEDED`.
    public var errorCode: String?
    /// FCM's message, as sent.
    public var message: String?
    /// The `Retry-After` header, as sent.
    public var retryAfter: String?

    public init(httpStatus: Int, status: String?, errorCode: String?, message: String?, retryAfter: String?) {
        self.httpStatus = httpStatus
        self.status = status
        self.errorCode = errorCode
        self.message = message
        self.retryAfter = retryAfter
    }
}

/// Why a ping was not accepted by FCM.
public enum FCMError: Error, Equatable, Sendable, CustomStringConvertible {
    /// FCM answered with an error status.
    case rejected(FCMErrorResponse)
    /// FCM could not be reached, or did not answer in time.
    case transport(String)
    /// No access token could be had.
    case token(TokenError)
    /// FCM answered 200 without a message name.
    case invalidResponse(String)
    /// The caller's gate held the request back (right before it would have left): why.
    case withheld(String)

    public var description: String {
        switch self {
        case .rejected(let response):
            "FCM answered \(response.httpStatus)" + ((response.errorCode ?? response.status).map { " \($0)" } ?? "")
                + (response.message.map { ": \($0)" } ?? "")
        case .transport(let reason): "FCM could not be reached: \(reason)"
        case .token(let error): "no access token: \(error)"
        case .invalidResponse(let reason): "FCM's answer is not usable: \(reason)"
        case .withheld(let reason): "not sent: \(reason)"
        }
    }
}
