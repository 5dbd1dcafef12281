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
