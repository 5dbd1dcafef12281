import HTTPTypes

/// The request headers intake reads, found in one pass over the fields. `HTTPFields`' subscript scans the fields
/// twice for each name it is asked, and intake asks for eleven: 4.7 µs of a webhook's CPU (issue #35's profile).
/// A name given more than once reads as `HTTPFields` reads it: the values in order, joined by ", "; except
/// `webhook-signature`, whose lines are joined by a space, the separator of its entries (Standard Webhooks), so a
/// signature in any line is read.
struct IntakeHeaders: Sendable {
    var authorization: String?
    var webhookID: String?
    var webhookTimestamp: String?
    var webhookSignature: String?
    var contentType: String?
    var contentLength: String?
    var ceID: String?
    var ceSource: String?
    var ceSpecVersion: String?
    var ceType: String?

    init(_ fields: HTTPFields) {
        for field in fields {
            switch field.name {
            case .authorization: Self.add(field.value, to: &authorization)
            case .webhookID: Self.add(field.value, to: &webhookID)
            case .webhookTimestamp: Self.add(field.value, to: &webhookTimestamp)
            case .webhookSignature: Self.add(field.value, to: &webhookSignature, separator: " ")
            case .contentType: Self.add(field.value, to: &contentType)
            case .contentLength: Self.add(field.value, to: &contentLength)
            case .ceID: Self.add(field.value, to: &ceID)
            case .ceSource: Self.add(field.value, to: &ceSource)
            case .ceSpecVersion: Self.add(field.value, to: &ceSpecVersion)
            case .ceType: Self.add(field.value, to: &ceType)
            default: continue
            }
        }
    }

    private static func add(_ value: String, to slot: inout String?, separator: String = ", ") {
        slot = slot.map { $0 + separator + value } ?? value
    }
}
