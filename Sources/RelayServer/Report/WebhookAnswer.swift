import Hummingbird

/// The webhook's answer once delivery is over: `200 delivered`, or `502 delivery-failed` with every route's outcome.
enum WebhookAnswer {
    struct Delivered: Encodable {
        var status = "delivered"
        var requestId: String
        /// True when this event id was seen recently: nothing was sent again.
        var duplicate: Bool
        var event: Event
        var deliveries: [DeliveryReport]
    }

    /// What the relay understood of the event.
    struct Event: Encodable {
        var id: String?
        var format: String
        var project: String
        var versionNumber: String
        var updateType: String?
    }

    /// 202: the event is durably spooled and its pings are still being delivered.
    struct InProgress: Encodable {
        var status = "in-progress"
        var requestId: String
        var event: Event
    }

    static func inProgress(requestID: String, event: Event) -> Response {
        JSONResponse.make(InProgress(requestId: requestID, event: event), status: .accepted)
    }

    static func response(requestID: String, duplicate: Bool, event: Event, reports: [DeliveryReport]) -> Response {
        let failed = reports.filter { !$0.succeeded }.map(\.route)
        guard failed.isEmpty else {
            return Problem(
                .deliveryFailed, detail: "FCM did not accept the ping for route(s) \(failed.joined(separator: ", "))",
                requestID: requestID, deliveries: reports
            ).response()
        }
        return JSONResponse.make(Delivered(requestId: requestID, duplicate: duplicate, event: event, deliveries: reports))
    }
}
