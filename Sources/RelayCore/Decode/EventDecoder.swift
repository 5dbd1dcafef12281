import Foundation

/// The CloudEvent attributes that arrive as HTTP headers, plus the content type.
public struct EventHeaders: Sendable, Equatable {
    public var contentType: String?
    public var id: String?
    public var source: String?
    public var specVersion: String?
    public var type: String?

    public init(
        contentType: String?, id: String? = nil, source: String? = nil, specVersion: String? = nil,
        type: String? = nil
    ) {
        self.contentType = contentType
        self.id = id
        self.source = source
        self.specVersion = specVersion
        self.type = type
    }

    /// Binary-mode CloudEvents put at least one `ce-` attribute in the headers.
    var hasCloudEventAttributes: Bool { id != nil || source != nil || specVersion != nil || type != nil }
}

/// Turns a request body and its headers into a ``RemoteConfigEvent``, whatever shape it came in.
public enum EventDecoder {
    /// The CloudEvent type Eventarc uses for a Remote Config publish or rollback.
    public static let remoteConfigUpdatedType = "google.firebase.remoteconfig.remoteConfig.v1.updated"
    static let sourcePrefix = "//firebaseremoteconfig.googleapis.com/projects/"

    /// Decodes one event; every failure is a ``DecodeError`` that says what was wrong.
    public static func decode(body: Data, headers: EventHeaders) throws(DecodeError) -> RemoteConfigEvent {
        switch mediaType(headers.contentType) {
        case "application/cloudevents+json":
            return try decodeStructured(body)
        case "application/json":
            guard headers.hasCloudEventAttributes else {
                return RemoteConfigEvent(id: nil, project: nil, format: .templateVersion, version: try version(body))
            }
            let attributes = Attributes(
                specversion: headers.specVersion, id: headers.id, source: headers.source, type: headers.type)
            let project = try check(attributes)
            return RemoteConfigEvent(
                id: headers.id, project: project, format: .cloudEventBinary, version: try version(body))
        default:
            throw .unsupportedContentType(headers.contentType)
        }
    }

    /// `application/json; charset=utf-8` → `application/json`.
    static func mediaType(_ contentType: String?) -> String? {
        guard let contentType else { return nil }
        // The usual spellings need no work (Foundation's trimming and lowercasing measured 1.7 % of a webhook's CPU).
        if contentType == "application/json" || contentType == "application/cloudevents+json" { return contentType }
        let type = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return type.trimmingCharacters(in: .whitespaces).lowercased()
    }

    private struct Attributes: Decodable {
        var specversion: String?
        var id: String?
        var source: String?
        var type: String?
    }

    private struct StructuredData: Decodable {
        var data: TemplateVersion
    }

    /// How a structured event carries its data: the version as a JSON object (Eventarc's), the version's JSON text as a
    /// string (what the `cloudevents` SDKs write for text data), or `data_base64` (for bytes).
    private struct StructuredPayload: Decodable {
        enum Data: Decodable {
            case object
            case text(String)
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                self = (try? container.decode(String.self)).map(Data.text) ?? .object
            }
        }
        var data: Data?
        var data_base64: String?
    }

    private static func decodeStructured(_ body: Data) throws(DecodeError) -> RemoteConfigEvent {
        // Attributes first, so an event of another type is refused as such before its data is read.
        let attributes = try json(Attributes.self, from: body)
        let project = try check(attributes)
        let payload = try json(StructuredPayload.self, from: body)
        let version: TemplateVersion
        switch (payload.data, payload.data_base64) {
        case (.text(let text)?, _):
            version = try json(TemplateVersion.self, from: Foundation.Data(text.utf8), dataPrefix: "data.")
        case (nil, let encoded?):
            guard let bytes = Foundation.Data(base64Encoded: encoded) else { throw .malformedJSON("'data_base64' is not base64") }
            version = try json(TemplateVersion.self, from: bytes, dataPrefix: "data_base64.")
        default:
            version = try json(StructuredData.self, from: body, dataPrefix: "data.").data
        }
        return RemoteConfigEvent(id: attributes.id, project: project, format: .cloudEventStructured, version: version)
    }

    /// The longest event id kept, in Unicode scalars as JSON Schema's `maxLength` counts (`ce-id`, `webhook-id`, a
    /// Pub/Sub message id): ids are keys in memory and on disk, a kilobyte at most.
    public static let maximumIDLength = 256

    /// Checks an event id (`ce-id`, `webhook-id`, a Pub/Sub message id) named `name` in errors: at most
    /// ``maximumIDLength`` Unicode scalars, and no control character.
    public static func checkID(_ id: String, name: String) throws(DecodeError) {
        // Printable ASCII, the ids every sender uses, answers the same as the general check below, byte by byte: a
        // scalar per byte, and ASCII's only control characters are 0x00–0x1F and 0x7F.
        if id.utf8.count <= maximumIDLength, id.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return }
        guard id.unicodeScalars.count <= maximumIDLength else { throw .idTooLong(name) }
        guard !id.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .idHasControlCharacter(name)
        }
    }

    /// Checks the required attributes and returns the project named by `source` (nil for `projects/_`).
    private static func check(_ attributes: Attributes) throws(DecodeError) -> String? {
        guard let specversion = attributes.specversion else { throw .missingAttribute("specversion") }
        guard specversion == "1.0" else { throw .unsupportedSpecVersion(specversion) }
        guard let type = attributes.type else { throw .missingAttribute("type") }
        guard type == remoteConfigUpdatedType else { throw .unknownEventType(type) }
        guard let id = attributes.id, !id.isEmpty else { throw .missingAttribute("id") }
        try checkID(id, name: "the CloudEvent id")
        guard let source = attributes.source else { throw .missingAttribute("source") }
        // Compared in UTF-8, not in Characters: a combining mark after the slash would make "/" part of another
        // grapheme and the prefix would not match, although the bytes do.
        guard source.utf8.starts(with: sourcePrefix.utf8) else { throw .invalidSource(source) }
        let project = source.utf8.dropFirst(sourcePrefix.utf8.count)
        guard !project.isEmpty, !project.contains(UInt8(ascii: "/")), let name = String(project) else { throw .invalidSource(source) }
        return name == "_" ? nil : name
    }

    private static func version(_ body: Data) throws(DecodeError) -> TemplateVersion {
        if let plain = body.withUnsafeBytes({ PlainTemplateVersion.read($0) }) { return plain }
        return try json(TemplateVersion.self, from: body)
    }

    private static func json<T: Decodable>(
        _ type: T.Type, from body: Data, dataPrefix: String = ""
    ) throws(DecodeError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch let error as DecodingError {
            throw map(error, prefix: dataPrefix)
        } catch let error as DecodeError {
            throw error  // a field given under both its names (ProtoJSON)
        } catch {
            throw .malformedJSON("\(error)")
        }
    }

    private static func map(_ error: DecodingError, prefix: String) -> DecodeError {
        switch error {
        case .keyNotFound(let key, let context):
            let path = (context.codingPath + [key]).map(\.stringValue)
            if path.last == "versionNumber" || path.last == "version_number" { return .missingVersionNumber }
            return .malformedJSON("'\(path.joined(separator: "."))' is missing")
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return .malformedJSON("not valid JSON")
        case .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            let int64s = ["versionNumber", "version_number", "rollbackSource", "rollback_source"]
            return int64s.contains { path.hasSuffix($0) } ? .invalidField(path) : .malformedJSON("'\(path)' is invalid")
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return .malformedJSON(path.isEmpty ? "expected a JSON object" : "'\(path)' has the wrong type")
        @unknown default:
            return .malformedJSON("unreadable")
        }
    }
}
