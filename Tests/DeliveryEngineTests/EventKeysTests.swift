import Testing

@testable import DeliveryEngine

/// An event's keys, made in one place whoever brings the event (issue #51): the version's key first, so a poll, a
/// webhook and an admin discard of the same version name one event.
struct EventKeysTests {
    @Test func aPollAndAWebhookOfOneVersionShareTheVersionKeyAndItComesFirst() {
        let polled = EventRecord.keys(project: "p", version: 42)
        let webhook = EventRecord.keys(project: "p", version: 42, eventID: "e-1", webhookID: "msg_1")
        #expect(polled == ["p/version/42"])
        #expect(webhook == ["p/version/42", "p/id/e-1", "webhook/msg_1"])
        #expect(webhook.first == EventRecord.versionKey(project: "p", version: 42))
    }

    @Test func aWebhookIDAloneIsAKeyAcrossProjectsAndNoIDKey() {
        let keys = EventRecord.keys(project: "p", version: 7, webhookID: "msg_2")
        #expect(keys == ["p/version/7", "webhook/msg_2"])
        #expect(EventRecord.keys(project: "q", version: 8, webhookID: "msg_2").last == keys.last)
    }

    @Test func anotherProjectsVersionIsAnotherEvent() {
        #expect(EventRecord.versionKey(project: "p", version: 1) != EventRecord.versionKey(project: "q", version: 1))
        #expect(EventRecord.versionKey(project: "p", version: 1) != EventRecord.versionKey(project: "p", version: 10))
    }
}
