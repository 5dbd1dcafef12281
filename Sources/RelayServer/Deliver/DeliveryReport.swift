import FCMClient

/// What happened to one route's ping, as the webhook answer reports it.
public struct DeliveryReport: Sendable, Encodable, Equatable {
    public enum Status: String, Sendable, Encodable {
        /// FCM accepted the message for delivery.
        case accepted
        /// FCM checked the message without delivering it (`validate_only`).
        case validated
        /// FCM, or the token endpoint, refused or could not be reached.
        case failed
    }

    public var route: String
    public var status: Status
    public var messageName: String?
    public var error: ErrorDetail?

    /// Why a ping failed, in FCM's terms.
    public struct ErrorDetail: Sendable, Encodable, Equatable {
        public var httpStatus: Int?
        public var errorCode: String?
        public var message: String
    }

    init(route: String, failure: FCMError) {
        self.route = route
        self.status = .failed
        switch failure {
        case .rejected(let response):
            self.error = .init(httpStatus: response.httpStatus, errorCode: response.errorCode ?? response.status, message: failure.description)
        default:
            self.error = .init(httpStatus: nil, errorCode: nil, message: failure.description)
        }
    }

    init(route: String, messageName: String, validated: Bool) {
        self.route = route
        self.status = validated ? .validated : .accepted
        self.messageName = messageName
    }
}
