import Foundation

/// Pub/Sub push: `{"message": {"data": base64(template version), "attributes", "messageId", "publishTime"}, "subscription"}`.
/// CloudEvent attributes (`ce-type`, `ce-source`, …), when the publisher set them, are checked like binary-mode headers;
/// `ce-specversion` defaults to 1.0 and `ce-id` to the message's id.
public enum PubSubDecoder {
    private struct Envelope: Decodable {
        struct Message: Decodable {
            var data: String?
            var attributes: [String: String]?
            var messageId: String?
            var message_id: String?
        }
        var message: Message
        var subscription: String?
    }

    public static func decode(body: Data, contentType: String?) throws(DecodeError) -> RemoteConfigEvent {
        guard EventDecoder.mediaType(contentType) == "application/json" else { throw .unsupportedContentType(contentType) }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: body)
        } catch {
            throw .invalidEnvelope("expected {\"message\": {\"data\", \"messageId\"}, \"subscription\"}")
        }
        guard let id = envelope.message.messageId ?? envelope.message.message_id, !id.isEmpty else {
            throw .invalidEnvelope("message.messageId is missing")
        }
        try EventDecoder.checkID(id, name: "message.messageId")
        guard let encoded = envelope.message.data, let data = Data(base64Encoded: encoded) else {
            throw .invalidEnvelope("message.data is missing or not base64")
        }
        let attributes = envelope.message.attributes ?? [:]
        // A publisher may name only the event's type and source: the message is the event (its id the message's), and
        // CloudEvents 1.0 is the only version there is.
        let described = ["ce-id", "ce-source", "ce-specversion", "ce-type"].contains { attributes[$0] != nil }
        let headers = EventHeaders(
            contentType: "application/json", id: attributes["ce-id"] ?? (described ? id : nil), source: attributes["ce-source"],
            specVersion: attributes["ce-specversion"] ?? (described ? "1.0" : nil), type: attributes["ce-type"])
        // Decoded as the CloudEvent its attributes describe, or as a bare version when there are none.
        let inner = try EventDecoder.decode(body: data, headers: headers)
        var event = RemoteConfigEvent(id: id, project: inner.project, format: .pubSub, version: inner.version)
        event.traceParent = attributes["googclient_traceparent"]
        event.traceState = attributes["googclient_tracestate"]
        return event
    }
}
