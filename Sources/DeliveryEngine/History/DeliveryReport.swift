import Foundation

/// What happened to one route's ping, with every attempt, as the webhook answer reports it.
public struct DeliveryReport: Sendable, Codable, Equatable {
    public enum Status: String, Sendable, Codable {
        /// Its destination accepted the message for delivery.
        case accepted
        /// Its destination checked the message without delivering it (`validate_only`).
        case validated
        /// Its destination refused it for good (by the sender's rules): retrying cannot help.
        case failed
        /// Retries ran out (attempts or deadline) while the destination kept failing.
        case dead
        /// A newer version's ping for the same route and audience took over while this one waited to retry, in its
        /// quiet period or for its turn in a wave.
        case superseded
        /// The relay stopped while the ping waited (to retry, or for its turn); the event is spooled for the next start (or, with no
        /// spool, left to the sender's retry).
        case interrupted
    }

    /// The delivery log's id for this ping (`GET /admin/deliveries/{id}`).
    public var id: String?
    public var route: String
    public var status: Status
    public var messageName: String?
    /// The last error, when not accepted.
    public var error: ErrorDetail?
    /// Every attempt, oldest first.
    public var attempts: [Attempt]

    /// Why an attempt failed, in its destination's terms.
    public struct ErrorDetail: Sendable, Codable, Equatable {
        public var httpStatus: Int?
        public var errorCode: String?
        public var message: String
    }

    /// One request.
    public struct Attempt: Sendable, Codable, Equatable {
        public var at: Date
        /// The destination's HTTP status; absent when it could not be reached.
        public var httpStatus: Int?
        public var errorCode: String?
    }

    /// Settled without anything left to do: accepted, validated, or replaced by a newer version's ping.
    package var succeeded: Bool { status == .accepted || status == .validated || status == .superseded }

    /// Not delivered, and worth delivering later: retries ran out, or the relay stopped first.
    package var unfinished: Bool { status == .dead || status == .interrupted }

    package static func detail(_ failure: SendFailure) -> ErrorDetail {
        .init(httpStatus: failure.httpStatus, errorCode: failure.errorCode, message: failure.description)
    }

    package static func attempt(_ failure: SendFailure?, at: Date) -> Attempt {
        guard let failure else { return Attempt(at: at, httpStatus: 200, errorCode: nil) }
        let detail = detail(failure)
        return Attempt(at: at, httpStatus: detail.httpStatus, errorCode: detail.errorCode)
    }
}
