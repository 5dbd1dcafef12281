import Foundation
import Hummingbird
import RelayCore

/// `POST /admin/preview` and `POST /admin/send`, served straight on Hummingbird: their bodies are decoded by RelayCore's
/// rules (a template version exactly as a webhook's), with the types `openapi.yaml` states, which the generated layer
/// cannot hold (a preview is a version *or* an event, a `oneOf`; optional fields may be null). The admin gate in front
/// checks the token and the body's size.
struct AdminBodyRoutes: Sendable {
    let admin: AdminController

    func register(on router: Router<RelayRequestContext>) {
        router.post("/admin/preview") { request, _ in
            await answer(request) { body throws(Refusal) in JSONResponse.make(try await admin.preview(try Self.preview(body))) }
        }
        router.post("/admin/send") { request, _ in
            await answer(request) { body throws(Refusal) in JSONResponse.make(try await admin.send(try Self.send(body))) }
        }
    }

    private func answer(_ request: Request, _ handle: (Data) async throws(Refusal) -> Response) async -> Response {
        let requestID = RequestInfo.current?.id ?? ""
        do throws(Refusal) {
            guard let type = request.headers[.contentType], type.lowercased().hasPrefix("application/json") else {
                throw Refusal(kind: .unsupportedMediaType, detail: "send application/json")
            }
            var request = request
            let body: Data
            do {
                body = Data(buffer: try await request.collectBody(upTo: .max))  // bounded by the admin gate already
            } catch {
                throw Refusal(kind: .invalidRequest, detail: "the body could not be read")
            }
            return try await handle(body)
        } catch {
            if !error.isLogged, let logger = RequestInfo.current?.logger { _ = error.logged("admin request refused", to: logger) }
            return error.response(requestID: requestID)
        }
    }

    /// What a preview asks for: a version or an event, perhaps a project, and whether to explain what the version
    /// changed (since `since`, default the version before it) when no route needs it.
    struct PreviewAsk: Sendable {
        var project: String?
        var version: TemplateVersion?
        var event: RemoteConfigEvent?
        var since: Int64?
        var explain = false
    }

    /// What a send asks for.
    struct SendAsk: Sendable, Decodable {
        var project: String?
        var version: TemplateVersion
        var route: String?
        var validateOnly: Bool?
        var token: String?
    }

    private struct PreviewFields: Decodable {
        var project: String?
        var version: TemplateVersion?
        var since: String?
        var explain: Bool?
    }

    static func preview(_ body: Data) throws(Refusal) -> PreviewAsk {
        let object = try Self.object(body)
        let fields: PreviewFields = try Self.decode(body)
        var ask = PreviewAsk(project: try Self.project(fields.project), explain: fields.explain ?? false)
        if let since = fields.since {
            // As openapi.yaml says: 1 to 19 digits, not starting with 0, within int64.
            guard (1...19).contains(since.utf8.count), since.utf8.allSatisfy({ (48...57).contains($0) }), since.first != "0",
                let number = Int64(since)
            else { throw Refusal(kind: .invalidRequest, detail: "since must be a version number (1 to 19 digits, at most 9223372036854775807)") }
            ask.since = number
        }
        switch (object["version"], object["event"]) {
        case (let version?, nil) where !(version is NSNull):
            ask.version = fields.version
        case (nil, let event?):
            guard event is [String: Any], let part = try? JSONSerialization.data(withJSONObject: event) else {
                throw Refusal(kind: .invalidRequest, detail: "event must be a structured CloudEvent (a JSON object)")
            }
            do throws(DecodeError) {
                ask.event = try EventDecoder.decode(body: part, headers: EventHeaders(contentType: "application/cloudevents+json"))
            } catch {
                let kind = Refusal.kind(of: error)
                throw Refusal(kind: kind == .malformedEvent ? .invalidRequest : kind, detail: error.description)
            }
        default:
            throw Refusal(kind: .invalidRequest, detail: "give either version (a template version) or event (a structured CloudEvent), not both")
        }
        return ask
    }

    static func send(_ body: Data) throws(Refusal) -> SendAsk {
        let object = try Self.object(body)
        for field in ["route", "token"] where object[field] is NSNull {
            throw Refusal(kind: .invalidRequest, detail: "\(field) must be a string when given")
        }
        var ask: SendAsk = try Self.decode(body)
        ask.project = try Self.project(ask.project)
        return ask
    }

    private static func object(_ body: Data) throws(Refusal) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            throw Refusal(kind: .invalidRequest, detail: "the body is not a JSON object")
        }
        return object
    }

    private static func project(_ project: String?) throws(Refusal) -> String? {
        if project?.isEmpty == true { throw Refusal(kind: .invalidRequest, detail: "project must not be empty") }
        return project
    }

    /// Decodes with the types the spec states; the error names the field, never its value.
    private static func decode<T: Decodable>(_ body: Data) throws(Refusal) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch let error as DecodingError {
            let path: [any CodingKey]
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): path = context.codingPath
            case .keyNotFound(let key, let context): path = context.codingPath + [key]
            @unknown default: path = []
            }
            let field = path.map(\.stringValue).joined(separator: ".")
            throw Refusal(kind: .invalidRequest, detail: "the body does not match the schema at \(field.isEmpty ? "its top level" : field)")
        } catch let error as DecodeError {
            throw Refusal(kind: .invalidRequest, detail: "\(error)")  // a field given under both its names
        } catch {
            throw Refusal(kind: .invalidRequest, detail: "the body could not be read")
        }
    }
}
