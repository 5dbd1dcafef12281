import DeliveryEngine
import Foundation
import Hummingbird
import RelayCore

/// The kinds of refusal and failure the webhook answers with, each a stable `type` and status (RFC 9457).
public enum ProblemKind: String, Sendable, CaseIterable {
    case invalidSignature = "invalid-signature"
    case timestampOutOfTolerance = "timestamp-out-of-tolerance"
    case invalidIDToken = "invalid-id-token"
    case verificationUnavailable = "verification-unavailable"
    case bodyTooLarge = "body-too-large"
    case unsupportedMediaType = "unsupported-media-type"
    case malformedEvent = "malformed-event"
    case unknownEventType = "unknown-event-type"
    case unknownProject = "unknown-project"
    case eventConflict = "event-id-conflict"
    case deliveryFailed = "delivery-failed"
    case deliveryInProgress = "delivery-in-progress"
    case notReady = "not-ready"
    case unauthorized
    case notFound = "not-found"
    case methodNotAllowed = "method-not-allowed"
    case invalidRequest = "invalid-request"
    case notRetryable = "not-retryable"
    case notDiscardable = "not-discardable"
    case invalidConfiguration = "invalid-configuration"
    case internalError = "internal-error"

    public var status: HTTPResponse.Status {
        switch self {
        case .invalidSignature, .timestampOutOfTolerance, .invalidIDToken: .unauthorized
        case .verificationUnavailable, .deliveryInProgress, .notReady: .serviceUnavailable
        case .unauthorized: .unauthorized
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .invalidRequest: .badRequest
        case .notRetryable, .notDiscardable, .eventConflict: .conflict
        case .invalidConfiguration: .unprocessableContent
        case .internalError: .internalServerError
        case .bodyTooLarge: .contentTooLarge
        case .unsupportedMediaType: .unsupportedMediaType
        case .malformedEvent: .badRequest
        case .unknownEventType, .unknownProject: .unprocessableContent
        case .deliveryFailed: .badGateway
        }
    }

    public var title: String {
        switch self {
        case .invalidSignature: "The webhook signature is missing or does not verify"
        case .timestampOutOfTolerance: "The webhook timestamp is too old or in the future"
        case .invalidIDToken: "The Google-signed ID token is missing or not acceptable"
        case .verificationUnavailable: "The sender cannot be verified right now"
        case .bodyTooLarge: "The request body is larger than allowed"
        case .unsupportedMediaType: "The content type is not JSON or CloudEvents JSON"
        case .malformedEvent: "The body is not a Remote Config template version or CloudEvent"
        case .unknownEventType: "The event is not a Remote Config update"
        case .unknownProject: "The event's Firebase project is not configured"
        case .eventConflict: "The event's id belongs to another event"
        case .deliveryFailed: "Not every ping was accepted by its target"
        case .deliveryInProgress: "The pings are still being delivered"
        case .notReady: "The relay is not ready"
        case .unauthorized: "A valid admin bearer token is required"
        case .notFound: "There is nothing here"
        case .methodNotAllowed: "The path does not take this method"
        case .invalidRequest: "The request does not match the API"
        case .notRetryable: "Only dead or failed pings can be retried"
        case .notDiscardable: "Only the dead ping of an acknowledged event still waiting for its target can be discarded"
        case .invalidConfiguration: "The configuration file is refused"
        case .internalError: "Something went wrong inside the relay"
        }
    }

    /// What the webhook and Pub/Sub endpoints answer with (`openapi.yaml` documents each status). `not-found`: Pub/Sub
    /// push without `oidc`, or webhooks with `webhook.auth: none`.
    public static let ingest: [ProblemKind] = [
        .invalidSignature, .timestampOutOfTolerance, .invalidIDToken, .verificationUnavailable, .bodyTooLarge,
        .unsupportedMediaType, .malformedEvent, .unknownEventType, .unknownProject, .eventConflict, .deliveryFailed,
        .deliveryInProgress, .notReady, .notFound,
    ]

    /// The `type` URI: a URN, so it is stable and names no host.
    public var uri: String { "urn:rc-relay:problem:\(rawValue)" }
}

/// An `application/problem+json` body. `detail` says what was wrong without echoing secrets or signatures.
struct Problem: Encodable, Sendable {
    var type: String
    var title: String
    var status: Int
    var detail: String
    var requestId: String
    var deliveries: [DeliveryReport]?
    var checks: [ReadinessCheck]?

    init(_ kind: ProblemKind, detail: String, requestID: String, deliveries: [DeliveryReport]? = nil, checks: [ReadinessCheck]? = nil) {
        self.type = kind.uri
        self.title = kind.title
        self.status = Int(kind.status.code)
        self.detail = detail
        self.requestId = requestID
        self.deliveries = deliveries
        self.checks = checks
    }

    func response() -> Response {
        guard deliveries == nil, checks == nil else {
            return JSONResponse.make(self, status: .init(code: status), contentType: "application/problem+json")
        }
        // A refusal's answer, written by hand (keys in `JSONResponse`'s sorted order): through `JSONEncoder` it was 4 % of
        // the CPU a flood of forged requests costs (docs/performance.md).
        return Response(
            status: .init(code: status), headers: [.contentType: "application/problem+json"],
            body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }

    /// The body without `deliveries` and `checks`, as `JSONResponse.encoder` writes it.
    var json: [UInt8] {
        var json = JSONBytes()
        json.open()
        json.field("detail", detail)
        json.field("requestId", requestId)
        json.field("status", status)
        json.field("title", title)
        json.field("type", type)
        json.close()
        return json.bytes
    }
}

/// JSON bodies for responses.
enum JSONResponse {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // RFC 3339 with milliseconds, so attempt times show the backoff between them.
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(DateFormat.string(date))
        }
        return encoder
    }()

    static func make(_ value: some Encodable, status: HTTPResponse.Status = .ok, contentType: String = "application/json") -> Response {
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
