import Foundation
import RelayCore
import Testing

@testable import DeliveryEngine

/// The hand-written JSON of stored records, reports and history entries: what `JSONEncoder` writes (the same JSON
/// value), read back by `JSONDecoder` as the same Swift value, for every field set, every optional absent, and text
/// that needs escaping.
struct RecordJSONTests {
    static let awkward = "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} unicode é 🚀 \u{2028}"

    static let version = TemplateVersion(
        versionNumber: 1_234_567_890_123, updateTime: "2026-11-26T05:00:00.123456Z",
        updateUser: .init(name: awkward, email: "a@example.com", imageUrl: "https://example.com/a.png"), description: "",
        updateOrigin: "CONSOLE", updateType: "ROLLBACK", rollbackSource: -42)

    static let dates = [
        Date(timeIntervalSinceReferenceDate: 785_000_000.123456), Date(timeIntervalSinceReferenceDate: -1e-7),
        Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSince1970: 1_700_000_000),
    ]

    static let reports = [
        DeliveryReport(
            id: "d-1", route: awkward, status: .dead, messageName: nil,
            error: .init(httpStatus: 503, errorCode: "UNAVAILABLE", message: awkward),
            attempts: dates.map { DeliveryReport.Attempt(at: $0, httpStatus: 503, errorCode: "UNAVAILABLE") }
                + [DeliveryReport.Attempt(at: dates[0], httpStatus: nil, errorCode: nil)]),
        DeliveryReport(id: nil, route: "default", status: .accepted, messageName: "projects/p/messages/1", attempts: []),
        DeliveryReport(
            id: "d-2", route: "r", status: .failed, messageName: nil, error: .init(httpStatus: nil, errorCode: nil, message: ""),
            attempts: []),
    ]

    static let records: [EventRecord] = {
        var full = EventRecord(
            keys: ["demo/version/1234567890123", awkward, ""], project: "demo", eventID: awkward, format: "cloudevent",
            version: version, receivedAt: dates[0], routes: ["a", awkward])
        full.done = ["a@0", "a@1"]
        full.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let bare = EventRecord(
            keys: [], project: "", eventID: nil, format: "bare", version: TemplateVersion(versionNumber: -1), receivedAt: dates[1])
        var empty = bare
        (empty.routes, empty.done) = ([], [])
        return [full, bare, empty]
    }()

    static let entries: [DeliveryHistory.Entry] = {
        let minimal = DeliveryHistory.Entry(
            id: "p-1", project: "demo", route: "default", version: TemplateVersion(versionNumber: 7), eventID: nil, origin: .webhook,
            retryOf: nil, toDevice: false, validateOnly: false, receivedAt: dates[2], settledAt: nil, report: nil)
        var entries = [minimal]
        let audiences: [PingAudience] = [
            .topic("PUSH_RC"), .condition("'a' in topics && 'b' in topics"), PingAudience(.token(awkward)),
            PingAudience(kind: awkward, name: awkward),
        ]
        let spacings: [Duration] = [.milliseconds(1500), .zero, .seconds(-3) + .nanoseconds(1), .seconds(Int64.max / 1_000_000_000_000)]
        for (index, audience) in audiences.enumerated() {
            var full = DeliveryHistory.Entry(
                id: awkward, project: "demo", route: awkward, version: version, eventID: "evt-1", origin: .retry, retryOf: "p-0",
                toDevice: true, validateOnly: true, receivedAt: dates[index], settledAt: dates[3], report: reports[index % reports.count])
            full.decision = awkward
            full.audience = audience
            full.waitingUntil = dates[1]
            full.waitingFor = "quiet period"
            full.traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
            full.outlier = index == 0 ? true : nil
            full.replica = awkward
            full.narrowed = index == 0 ? ["lang_ja", awkward] : nil
            full.shard = PingSchedule.Shard(index: index, count: 3, spacing: spacings[index])
            entries.append(full)
        }
        var waved = minimal
        waved.shard = PingSchedule.Shard(index: 0, count: 1, spacing: spacings[3])
        entries.append(waved)
        return entries
    }()

    @Test(arguments: records) func aRecord(_ record: EventRecord) throws {
        try expectSameJSON(record.jsonText, as: record)
    }

    @Test func reportArrays() throws {
        try expectSameJSON(DeliveryReport.jsonText(Self.reports), as: Self.reports)
        try expectSameJSON(DeliveryReport.jsonText([]), as: [DeliveryReport]())
    }

    @Test(arguments: entries) func anEntry(_ entry: DeliveryHistory.Entry) throws {
        try expectSameJSON(entry.jsonText, as: entry)
    }

    /// A record as a shared store's row keeps it, without its keys and its project (in columns of their own), is the
    /// record's JSON less its first two fields: put back as the store puts them back, it reads as the record.
    @Test(arguments: records) func aRecordForItsRow(_ record: EventRecord) throws {
        let text = record.jsonTextForRow
        #expect(!text.contains("\"keys\"") && !text.contains("\"project\""))
        let keys = String(decoding: try JSONEncoder().encode(record.keys), as: UTF8.self)
        let project = String(decoding: try JSONEncoder().encode(record.project), as: UTF8.self)
        let putBack = "{\"keys\":" + keys + ",\"project\":" + project + "," + text.dropFirst()
        #expect(try JSONDecoder().decode(EventRecord.self, from: Data(putBack.utf8)) == record)
    }

    /// An entry riding its event's row leaves out what the row says (its project; its report and route when the row's
    /// reports hold the report; its event id when the row's; false flags; the origin `webhook`), and reads back as the
    /// same entry beside the row; an entry written whole (by an older relay) reads the same; a report the row's reports
    /// do not hold stays in the copy, with the route.
    @Test(arguments: entries) func anEntryRidingItsRow(_ entry: DeliveryHistory.Entry) throws {
        var plain = entry
        (plain.origin, plain.toDevice, plain.validateOnly) = (.webhook, false, false)
        plain.report = entry.report.map { report in
            var report = report
            (report.id, report.route) = (entry.id, entry.route)
            return report
        }
        let rowReports = Self.reports + (plain.report.map { [$0] } ?? [])
        for candidate in [entry, plain] {
            let riding = candidate.jsonText(beside: rowReports, eventID: candidate.eventID)
            #expect(!riding.contains("\"project\"") && !riding.contains("\"eventID\""))
            let copy = try JSONDecoder().decode(RidingCopy.self, from: Data(riding.utf8))
            #expect(copy.entry(project: candidate.project, reports: rowReports, eventID: candidate.eventID) == candidate)
            let whole = try JSONDecoder().decode(RidingCopy.self, from: Data(candidate.jsonText.utf8))
            // Its own event id wins over the row's (a copy without one rides a row without one: an event's pings carry its id).
            #expect(whole.entry(project: "another", reports: [], eventID: candidate.eventID.map { _ in "another" }) == candidate)
            // Beside a row with another event id (none, or a different one), the copy keeps its own.
            let apart = candidate.jsonText(beside: rowReports, eventID: nil)
            #expect(apart.contains("\"eventID\"") == (candidate.eventID != nil))
            let read = try JSONDecoder().decode(RidingCopy.self, from: Data(apart.utf8))
            #expect(read.entry(project: candidate.project, reports: rowReports, eventID: nil) == candidate)
        }
        let ridingPlain = plain.jsonText(beside: rowReports, eventID: plain.eventID)
        #expect(!ridingPlain.contains("toDevice") && !ridingPlain.contains("validateOnly") && !ridingPlain.contains("\"origin\""))
        #expect(ridingPlain.contains("\"report\"") == false)
        #expect(ridingPlain.contains("\"route\"") == (plain.report == nil))
        // Beside reports that do not hold its report, the copy keeps it, and its route.
        let kept = plain.jsonText(beside: [], eventID: plain.eventID)
        #expect(kept.contains("\"report\"") == (plain.report != nil) && kept.contains("\"route\""))
        #expect(
            try JSONDecoder().decode(RidingCopy.self, from: Data(kept.utf8)).entry(project: plain.project, reports: [], eventID: plain.eventID)
                == plain)
        // A field added to an entry must be added to its riding copy too, or it would be lost in the row.
        let copy = try JSONDecoder().decode(RidingCopy.self, from: Data(entry.jsonText.utf8))
        #expect(Mirror(reflecting: copy).children.map(\.label) == Mirror(reflecting: entry).children.map(\.label))
    }

    /// `text` is the JSON value `JSONEncoder` writes for `value`, and decodes back to `value`.
    private func expectSameJSON<T: Codable & Equatable>(_ text: String, as value: T) throws {
        let decoded = try JSONDecoder().decode(T.self, from: Data(text.utf8))
        #expect(decoded == value)
        // The same JSON value: both read and written again with sorted keys.
        func canonical(_ data: Data) throws -> String {
            let object = try JSONSerialization.jsonObject(with: data)
            return String(decoding: try JSONSerialization.data(withJSONObject: object, options: .sortedKeys), as: UTF8.self)
        }
        #expect(try canonical(Data(text.utf8)) == canonical(JSONEncoder().encode(value)))
    }
}
