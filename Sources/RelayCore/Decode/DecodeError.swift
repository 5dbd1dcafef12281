/// Why an incoming body could not be turned into a ``RemoteConfigEvent``.
public enum DecodeError: Error, Equatable, Sendable {
    /// The content type is neither JSON nor CloudEvents JSON.
    case unsupportedContentType(String?)
    /// The body is not valid JSON, or not a JSON object.
    case malformedJSON(String)
    /// The template version has no `versionNumber`.
    case missingVersionNumber
    /// A field given under both its names (`versionNumber` and `version_number`): which one counts is not clear.
    case fieldGivenTwice(String)
    /// `versionNumber` (or another int64) is neither an integer nor a decimal string.
    case invalidField(String)
    /// A CloudEvent lacks a required attribute (`id`, `source`, `specversion`, `type`).
    case missingAttribute(String)
    /// A CloudEvent with a spec version other than 1.0.
    case unsupportedSpecVersion(String)
    /// A CloudEvent whose type is not the Remote Config update type.
    case unknownEventType(String)
    /// `ce-source` is not a Remote Config project source.
    case invalidSource(String)
    /// A Pub/Sub push body that is not `{message: {data, messageId, …}, subscription}`.
    case invalidEnvelope(String)
    /// An event id longer than ``EventDecoder/maximumIDLength``.
    case idTooLong(String)
    /// An event id with a control character (a NUL, a line break, …): no sender makes one, and the shared store
    /// cannot keep a NUL.
    case idHasControlCharacter(String)
}

extension DecodeError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .unsupportedContentType(let type):
            "content type \(type.map { "'\($0.prefix(100))'" } ?? "(none)") is not application/json or application/cloudevents+json"
        case .malformedJSON(let detail): "the body is not a JSON object: \(detail)"
        case .missingVersionNumber: "the template version has no versionNumber"
        case .fieldGivenTwice(let detail): detail
        case .invalidField(let field): "\(field) must be an integer or a decimal string"
        case .missingAttribute(let name): "the CloudEvent has no '\(name)' attribute"
        case .unsupportedSpecVersion(let version): "CloudEvents spec version '\(version.prefix(20))' is not supported (only 1.0)"
        case .unknownEventType(let type):
            "event type '\(type.prefix(100))' is not \(EventDecoder.remoteConfigUpdatedType)"
        case .invalidEnvelope(let reason): "the Pub/Sub push envelope is invalid: \(reason)"
        case .idTooLong(let name): "\(name) is longer than \(EventDecoder.maximumIDLength) characters"
        case .idHasControlCharacter(let name): "\(name) contains a control character (U+0000 to U+001F or U+007F to U+009F)"
        case .invalidSource(let source):
            "source '\(source.prefix(100))' is not //firebaseremoteconfig.googleapis.com/projects/{project}"
        }
    }
}
