import Foundation
import RelayCore

// The JSON of what the shared store keeps (spooled records, reports, history entries), written by hand: through
// `JSONEncoder` these were a fifth of the relay's own CPU per webhook with a shared store (docs/performance.md). The text is
// what `JSONEncoder` writes, key order aside, and `JSONDecoder` reads it back as the same value; RecordJSONTests holds
// every field to that.

extension EventRecord {
    /// The record as `JSONEncoder` would encode it.
    package var jsonText: String { jsonText(whole: true) }

    /// The record as a shared store's row keeps it, beside columns of its keys and its project: without those two
    /// fields, which a sweep puts back before decoding (`{"keys":…,"project":…,` then the rest).
    package var jsonTextForRow: String { jsonText(whole: false) }

    private func jsonText(whole: Bool) -> String {
        var json = JSONBytes()
        json.open()
        if whole {
            json.field("keys", keys)
            json.field("project", project)
        }
        json.field("eventID", eventID)
        json.field("format", format)
        json.key("version")
        json.write(version)
        json.field("receivedAt", number: receivedAt.timeIntervalSinceReferenceDate)
        json.field("routes", routes)
        json.field("done", done)
        if let outlier { json.field("outlier", outlier) }
        json.field("traceparent", traceparent)
        json.close()
        return String(decoding: json.bytes, as: UTF8.self)
    }
}

extension DeliveryReport {
    /// Reports as `JSONEncoder` would encode the array.
    package static func jsonText(_ reports: [DeliveryReport]) -> String {
        var json = JSONBytes()
        json.openArray()
        for report in reports { json.write(report) }
        json.closeArray()
        return String(decoding: json.bytes, as: UTF8.self)
    }
}

extension DeliveryHistory.Entry {
    /// The entry as `JSONEncoder` would encode it.
    package var jsonText: String { jsonText(riding: nil) }

    /// The entry as it rides its event's row, beside the event's project, reports and event id (`eventID`, from the
    /// row's keys): what the row says already is left out (its project; its report and route when the event's reports
    /// hold the same report; its event id when the row's; `toDevice` and `validateOnly` when false; the origin
    /// `webhook`). ``RidingCopy`` reads it back.
    package func jsonText(beside reports: [DeliveryReport], eventID rowEventID: String?) -> String {
        jsonText(riding: (reports, rowEventID))
    }

    private func jsonText(riding row: (reports: [DeliveryReport], eventID: String?)?) -> String {
        let riding = row != nil
        let reportRides = report.map { $0.id == id && row?.reports.contains($0) == true } ?? false
        var json = JSONBytes()
        json.open()
        json.field("id", id)
        if !riding { json.field("project", project) }
        if !(reportRides && report?.route == route) { json.field("route", route) }
        json.key("version")
        json.write(version)
        if !(riding && eventID != nil && eventID == row?.eventID) { json.field("eventID", eventID) }
        if !riding || origin != .webhook { json.field("origin", origin.rawValue) }
        json.field("retryOf", retryOf)
        if !riding || toDevice { json.field("toDevice", toDevice) }
        if !riding || validateOnly { json.field("validateOnly", validateOnly) }
        json.field("receivedAt", number: receivedAt.timeIntervalSinceReferenceDate)
        json.field("settledAt", number: settledAt?.timeIntervalSinceReferenceDate)
        if let report, !reportRides {
            json.key("report")
            json.write(report)
        }
        json.field("decision", decision)
        if let audience {
            // As ``PingAudience``'s Codable writes it: `{"topic":{"_0":"PUSH_RC"}}`.
            json.open("audience")
            json.open(audience.kind)
            json.field("_0", audience.name)
            json.close()
            json.close()
        }
        json.field("waitingUntil", number: waitingUntil?.timeIntervalSinceReferenceDate)
        json.field("waitingFor", waitingFor)
        json.field("traceID", traceID)
        if let shard {
            json.open("shard")
            json.field("index", shard.index)
            json.field("count", shard.count)
            // A `Duration`: its attoseconds as two 64-bit halves, high first.
            let attoseconds =
                Int128(shard.spacing.components.seconds) * 1_000_000_000_000_000_000
                + Int128(shard.spacing.components.attoseconds)
            json.key("spacing")
            json.raw("[\(Int64(truncatingIfNeeded: attoseconds >> 64)),\(UInt64(truncatingIfNeeded: attoseconds))]")
            json.close()
        }
        if let outlier { json.field("outlier", outlier) }
        json.field("replica", replica)
        json.field("narrowed", narrowed)
        json.close()
        return String(decoding: json.bytes, as: UTF8.self)
    }
}

/// A history entry as ``DeliveryHistory/Entry/jsonText(beside:eventID:)`` wrote it in its event's row (or whole, as an
/// older relay wrote it there): what it left out is put back from the row.
package struct RidingCopy: Decodable, Sendable {
    let id: String
    let project: String?
    /// Nil when its report, in the row's reports, says it (schema 11).
    let route: String?
    let version: TemplateVersion
    let eventID: String?
    let origin: DeliveryHistory.Origin?
    let retryOf: String?
    let toDevice: Bool?
    let validateOnly: Bool?
    let receivedAt: Date
    let settledAt: Date?
    let report: DeliveryReport?
    let decision: String?
    let audience: PingAudience?
    let waitingUntil: Date?
    let waitingFor: String?
    let shard: PingSchedule.Shard?
    let traceID: String?
    let outlier: Bool?
    let replica: String?
    let narrowed: [String]?

    /// The entry, with the row's project, the row's event id (`eventID`) when the copy left its own out, and, when the
    /// copy left its report out, the row's report of the same id (and that report's route).
    package func entry(project rowProject: String, reports: [DeliveryReport], eventID rowEventID: String?) -> DeliveryHistory.Entry {
        let report = report ?? reports.first { $0.id == id }
        var entry = DeliveryHistory.Entry(
            id: id, project: project ?? rowProject, route: route ?? report?.route ?? "", version: version, eventID: eventID ?? rowEventID,
            origin: origin ?? .webhook, retryOf: retryOf, toDevice: toDevice ?? false, validateOnly: validateOnly ?? false,
            receivedAt: receivedAt, settledAt: settledAt, report: report)
        (entry.decision, entry.audience, entry.waitingUntil, entry.waitingFor, entry.shard) = (decision, audience, waitingUntil, waitingFor, shard)
        (entry.traceID, entry.outlier, entry.replica, entry.narrowed) = (traceID, outlier, replica, narrowed)
        return entry
    }
}

extension JSONBytes {
    /// A template version as its `Encodable` conformance writes it (int64 as decimal strings), after a key or in an array.
    fileprivate mutating func write(_ version: TemplateVersion) {
        open()
        field("versionNumber", String(version.versionNumber))
        field("updateTime", version.updateTime)
        if let user = version.updateUser {
            open("updateUser")
            field("name", user.name)
            field("email", user.email)
            field("imageUrl", user.imageUrl)
            close()
        }
        field("description", version.description)
        field("updateOrigin", version.updateOrigin)
        field("updateType", version.updateType)
        field("rollbackSource", version.rollbackSource.map(String.init))
        close()
    }

    fileprivate mutating func write(_ report: DeliveryReport) {
        open()
        field("id", report.id)
        field("route", report.route)
        field("status", report.status.rawValue)
        field("messageName", report.messageName)
        if let error = report.error {
            open("error")
            field("httpStatus", error.httpStatus)
            field("errorCode", error.errorCode)
            field("message", error.message)
            close()
        }
        openArray("attempts")
        for attempt in report.attempts {
            open()
            field("at", number: attempt.at.timeIntervalSinceReferenceDate)
            field("httpStatus", attempt.httpStatus)
            field("errorCode", attempt.errorCode)
            close()
        }
        closeArray()
        close()
    }
}
