import Foundation
import Hummingbird

/// Error responses shaped like Google's (`google.rpc.Status` with FCM's `FcmError` detail, or OAuth's form).
enum GoogleErrors {
    static func fcm(
        _ code: Int, status: String, message: String, errorCode: String?, retryAfter: String? = nil, violation: FieldViolation? = nil
    ) -> Response {
        var error: [String: Any] = ["code": code, "message": message, "status": status]
        var details: [[String: Any]] = []
        if let errorCode { details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": errorCode]) }
        if let violation {
            details.append([
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [["field": violation.field, "description": violation.description]],
            ])
        }
        if !details.isEmpty { error["details"] = details }
        var headers: HTTPFields = [.contentType: "application/json; charset=UTF-8"]
        if let retryAfter { headers[.retryAfter] = retryAfter }
        return json(["error": error], status: .init(code: code), headers: headers)
    }

    /// A Google API error without FCM's detail (Remote Config's, say).
    static func google(_ code: Int, status: String, message: String, retryAfter: String? = nil) -> Response {
        fcm(code, status: status, message: message, errorCode: nil, retryAfter: retryAfter)
    }

    /// FCM's 400: its `FcmError` detail, and for a field its parser refused, a `google.rpc.BadRequest` that names it.
    static func invalidArgument(_ message: String, violation: FieldViolation? = nil) -> Response {
        fcm(400, status: "INVALID_ARGUMENT", message: message, errorCode: "INVALID_ARGUMENT", violation: violation)
    }

    static let unauthenticated = fcm(
        401, status: "UNAUTHENTICATED",
        message:
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        errorCode: nil)

    static func oauth(_ error: String, _ description: String, status: HTTPResponse.Status = .badRequest) -> Response {
        json(["error": error, "error_description": description], status: status)
    }

    static func json(_ object: Any, status: HTTPResponse.Status = .ok, headers: HTTPFields = [.contentType: "application/json; charset=UTF-8"])
        -> Response
    {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
