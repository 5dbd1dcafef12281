import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import OpenAPIRuntime
import RelayCore

/// A refusal or failure: the problem to answer with and the reason to log. Handlers and middleware throw it;
/// ``ProblemMiddleware`` (for the generated operations) and ``IngestRoutes`` turn it into `application/problem+json`.
struct Refusal: Error {
    var kind: ProblemKind
    var detail: String
    var deliveries: [DeliveryReport]? = nil
    var checks: [ReadinessCheck]? = nil
    /// Seconds for `Retry-After`, on the 503s a sender should retry.
    var retryAfter: Int? = nil
    /// Whether ``logged(_:to:_:)`` wrote its line: whoever answers logs the others, so each refusal is logged once.
    var isLogged = false

    static func kind(of error: DecodeError) -> ProblemKind {
        switch error {
        case .unsupportedContentType: .unsupportedMediaType
        case .unknownEventType: .unknownEventType
        case .malformedJSON, .missingVersionNumber, .fieldGivenTwice, .invalidField, .missingAttribute, .unsupportedSpecVersion, .invalidSource,
            .invalidEnvelope, .idTooLong, .idHasControlCharacter:
            .malformedEvent
        }
    }

    /// Logs the refusal with its `status`, `problem` and `reason` (and `extra`), and returns it to throw: every
    /// refusal's line carries the three fields operations.md names. At `warning` when the relay itself is why (`not-ready`:
    /// stopping, saturated, its store away), else at `notice`.
    func logged(_ message: Logger.Message, to logger: Logger, _ extra: Logger.Metadata = [:]) -> Refusal {
        var metadata: Logger.Metadata = ["status": "\(kind.status.code)", "problem": "\(kind.rawValue)", "reason": "\(detail)"]
        metadata.merge(extra) { _, new in new }
        logger.log(level: kind == .notReady ? .warning : .notice, message, metadata: metadata)
        var refusal = self
        refusal.isLogged = true
        return refusal
    }

    func problem(requestID: String) -> Problem {
        Problem(kind, detail: detail, requestID: requestID, deliveries: deliveries, checks: checks)
    }

    /// The problem+json answer, with `Retry-After` when the sender should retry.
    func response(requestID: String) -> Response {
        var response = problem(requestID: requestID).response()
        if let retryAfter { response.headers[.retryAfter] = "\(retryAfter)" }
        return response
    }
}

/// The outermost OpenAPI middleware: every error becomes problem+json. A ``Refusal`` says what it is; a request
/// the generated code could not parse is `invalid-request`; anything else is `internal-error`, logged with its cause.
struct ProblemMiddleware: ServerMiddleware {
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        do {
            return try await next(request, body, metadata)
        } catch {
            let info = RequestInfo.current
            let requestID = info?.id ?? ""
            var refusal: Refusal
            switch error {
            case let error as ServerError where error.underlyingError is Refusal:
                refusal = error.underlyingError as! Refusal
            case let error as ServerError where (400..<500).contains(error.httpStatus.code):
                let kind: ProblemKind =
                    error.httpStatus == .unsupportedMediaType ? .unsupportedMediaType : .invalidRequest
                refusal = Refusal(kind: kind, detail: Self.describe(error))
            case let error as Refusal:
                refusal = error
            default:
                info?.logger.error("request failed", metadata: ["operation": "\(operationID)", "error": "\(error)"])
                refusal = Refusal(kind: .internalError, detail: "the request could not be handled; the log has the details", isLogged: true)
            }
            // A handler's own refusal (an unknown delivery, a ping not retryable, …) is logged here unless it was.
            if !refusal.isLogged, let logger = info?.logger { refusal = refusal.logged("request refused", to: logger) }
            return Self.response(refusal, requestID: requestID)
        }
    }

    static func response(_ refusal: Refusal, requestID: String) -> (HTTPResponse, HTTPBody?) {
        let data = (try? JSONResponse.encoder.encode(refusal.problem(requestID: requestID))) ?? Data()
        var response = HTTPResponse(status: refusal.kind.status)
        response.headerFields[.contentType] = "application/problem+json"
        if let retryAfter = refusal.retryAfter { response.headerFields[.retryAfter] = "\(retryAfter)" }
        return (response, HTTPBody(data))
    }

    /// What did not match, by field path, without echoing values.
    static func describe(_ error: ServerError) -> String {
        let path: [any CodingKey]
        switch error.underlyingError as? DecodingError {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): path = context.codingPath
        case .keyNotFound(let key, let context): path = context.codingPath + [key]
        default: return error.causeDescription
        }
        let field = path.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        return "\(error.causeDescription): the body does not match the schema at \(field.isEmpty ? "its top level" : String(field.dropFirst()))"
    }
}
