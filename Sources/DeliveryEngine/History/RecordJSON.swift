import Foundation
import RelayCore

// The JSON of what the shared store keeps (spooled records, reports, history entries), written by hand: through
// `JSONEncoder` these were a fifth of the relay's own CPU per webhook with a shared store (docs/performance.md). The text is
// what `JSONEncoder` writes, key order aside, and `JSONDecoder` reads it back as the same value; RecordJSONTests holds
// every field to that.

extension EventRecord {
    /// The record as `JSONEncoder` would encode it.
    package var jsonText: String {
        var json = JSONBytes()
        json.open()
        json.field("keys", keys)
        json.field("project", project)
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
    package var jsonText: String {
        var json = JSONBytes()
        json.open()
        json.field("id", id)
        json.field("project", project)
        json.field("route", route)
        json.key("version")
        json.write(version)
        json.field("eventID", eventID)
        json.field("origin", origin.rawValue)
        json.field("retryOf", retryOf)
        json.field("toDevice", toDevice)
        json.field("validateOnly", validateOnly)
        json.field("receivedAt", number: receivedAt.timeIntervalSinceReferenceDate)
        json.field("settledAt", number: settledAt?.timeIntervalSinceReferenceDate)
        if let report {
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
