import DeliveryEngine
import RelayCore

/// The webhook's `200` (`Delivered`) and `202` (`InProgress`) bodies, as `openapi.yaml` documents them, written by
/// hand (keys sorted, as the relay's other answers are): through `JSONEncoder` they took about 6 % of the relay's CPU
/// per webhook (`perf`). The conformance tests hold these bytes to the document's schemas.
enum IngestAnswer {
    /// What the answer says about the event.
    struct EventSummary: Sendable {
        var id: String?
        var format: String
        var project: String
        var versionNumber: Int64
        var updateType: String?
    }

    /// The `200` answer's `status`: `failed` when FCM refused a ping for good; `superseded` when every ping stood down
    /// (FCM had accepted a newer version's ping for each audience already), so nothing was sent for this version;
    /// else `delivered`. Never `delivered` for a version of which no ping was sent (issue #49).
    static func status(_ reports: [DeliveryReport]) -> String {
        if reports.contains(where: { $0.status == .failed }) { return "failed" }
        if !reports.isEmpty, reports.allSatisfy({ $0.status == .superseded }) { return "superseded" }
        return "delivered"
    }

    static func delivered(requestID: String, duplicate: Bool, event: EventSummary, reports: [DeliveryReport]) -> [UInt8] {
        var out = JSONBytes()
        out.open()
        deliveries(reports, into: &out)
        out.field("duplicate", duplicate)
        summary(event, into: &out)
        out.field("requestId", requestID)
        out.field("status", status(reports))
        out.close()
        return out.bytes
    }

    static func inProgress(requestID: String, event: EventSummary) -> [UInt8] {
        var out = JSONBytes()
        out.open()
        summary(event, into: &out)
        out.field("requestId", requestID)
        out.field("status", "in-progress")
        out.close()
        return out.bytes
    }

    private static func summary(_ event: EventSummary, into out: inout JSONBytes) {
        out.open("event")
        out.field("format", event.format)
        out.field("id", event.id)
        out.field("project", event.project)
        out.field("updateType", event.updateType)
        out.field("versionNumber", String(event.versionNumber))
        out.close()
    }

    private static func deliveries(_ reports: [DeliveryReport], into out: inout JSONBytes) {
        out.openArray("deliveries")
        for report in reports {
            out.open()
            out.openArray("attempts")
            for attempt in report.attempts {
                out.open()
                out.field("at", DateFormat.string(attempt.at))
                out.field("errorCode", attempt.errorCode)
                out.field("httpStatus", attempt.httpStatus)
                out.close()
            }
            out.closeArray()
            if let error = report.error {
                out.open("error")
                out.field("errorCode", error.errorCode)
                out.field("httpStatus", error.httpStatus)
                out.field("message", error.message)
                out.close()
            }
            out.field("id", report.id)
            out.field("messageName", report.messageName)
            out.field("route", report.route)
            out.field("status", report.status.rawValue)
            out.close()
        }
        out.closeArray()
    }
}
