/// A decoded template update: what happened, where it came from, and how it reached us.
public struct RemoteConfigEvent: Sendable, Equatable {
    /// The wire shape the event arrived in.
    public enum Format: String, Sendable, Codable, CaseIterable {
        case cloudEventBinary = "cloudevent-binary"
        case cloudEventStructured = "cloudevent-structured"
        case templateVersion = "template-version"
        case pubSub = "pubsub"
    }

    /// The sender's event id (`ce-id`, or Pub/Sub's `messageId`), when the shape carries one.
    public var id: String?
    /// The Firebase project, from `ce-source` when present.
    public var project: String?
    /// How the event arrived.
    public var format: Format
    /// The template version itself.
    public var version: TemplateVersion
    /// The publisher's W3C trace context, when the event carries one inside it (a Pub/Sub message's
    /// `googclient_traceparent` and `googclient_tracestate` attributes, which Google's client libraries add when the
    /// publisher traces). Only ever read after the sender is verified.
    public var traceParent: String? = nil
    public var traceState: String? = nil

    public init(id: String?, project: String?, format: Format, version: TemplateVersion) {
        self.id = id
        self.project = project
        self.format = format
        self.version = version
    }
}
