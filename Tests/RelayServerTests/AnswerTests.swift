import Foundation
import Testing

@testable import DeliveryEngine
@testable import RelayServer

/// The hand-written ingest answers say exactly what `JSONEncoder` says for the same values (the encoder is the
/// oracle; `openapi.yaml`'s schemas are checked against live answers by the interop tests).
@Test func handWrittenAnswersMatchTheEncoder() throws {
    struct Summary: Encodable {
        var id: String?
        var format: String
        var project: String
        var versionNumber: String
        var updateType: String?
    }
    struct Delivered: Encodable {
        var status: String
        var requestId: String
        var duplicate: Bool
        var event: Summary
        var deliveries: [DeliveryReport]
    }
    struct InProgress: Encodable {
        var status = "in-progress"
        var requestId: String
        var event: Summary
    }
    let at = Date(timeIntervalSince1970: 1_763_716_443.512)
    let reports = [
        DeliveryReport(id: "d1", route: "default", status: .accepted, messageName: "projects/p/messages/1", attempts: [.init(at: at)]),
        DeliveryReport(
            id: "d2", route: "ios \"beta\"\n\u{1}/é", status: .failed,
            error: .init(httpStatus: 400, errorCode: "INVALID_ARGUMENT", message: "bad \\ thing\t"),
            attempts: [.init(at: at, httpStatus: 503, errorCode: "UNAVAILABLE"), .init(at: at.addingTimeInterval(1.25), httpStatus: 400)]),
        DeliveryReport(route: "web", status: .dead, error: .init(message: "unreachable"), attempts: [.init(at: at), .init(at: at)]),
    ]
    let cases: [(IngestAnswer.EventSummary, Summary)] = [
        (
            .init(id: "ev-1", format: "cloudevent-binary", project: "demo", versionNumber: 42, updateType: "ROLLBACK"),
            Summary(id: "ev-1", format: "cloudevent-binary", project: "demo", versionNumber: "42", updateType: "ROLLBACK")
        ),
        (
            .init(id: nil, format: "template-version", project: "p", versionNumber: -1, updateType: nil),
            Summary(id: nil, format: "template-version", project: "p", versionNumber: "-1", updateType: nil)
        ),
    ]
    let parse = { (bytes: [UInt8]) in try JSONSerialization.jsonObject(with: Data(bytes)) as! NSDictionary }
    for (summary, expected) in cases {
        let stoodDown = [DeliveryReport(id: "d3", route: "default", status: .superseded, attempts: [])]
        for (status, duplicate, deliveries) in [
            ("delivered", false, Array(reports.prefix(1))), ("failed", true, reports), ("delivered", false, []),
            ("superseded", false, stoodDown), ("delivered", false, stoodDown + reports.prefix(1)),
        ] {
            let hand = IngestAnswer.delivered(requestID: "r-1", duplicate: duplicate, event: summary, reports: deliveries)
            #expect(IngestAnswer.status(deliveries) == status)
            let oracle = try JSONResponse.encoder.encode(
                Delivered(status: status, requestId: "r-1", duplicate: duplicate, event: expected, deliveries: deliveries))
            #expect(try parse(hand) == (try JSONSerialization.jsonObject(with: oracle) as! NSDictionary))
        }
        let hand = IngestAnswer.inProgress(requestID: "r-2", event: summary)
        let oracle = try JSONResponse.encoder.encode(InProgress(requestId: "r-2", event: expected))
        #expect(try parse(hand) == (try JSONSerialization.jsonObject(with: oracle) as! NSDictionary))
    }
}

@Test func aRefusalWrittenByHandReadsAsTheEncoderWritesIt() throws {
    for detail in ["plain", #"quotes " and \ backslash"#, "lines\nand\ttabs\r", "control \u{1}\u{8}\u{c}\u{1f}", "ünïcödé ✓ and / slash", ""] {
        for kind in ProblemKind.allCases {
            let problem = Problem(kind, detail: detail, requestID: "req-\(kind.rawValue)")
            let byHand = try JSONSerialization.jsonObject(with: Data(problem.json)) as? NSDictionary
            let encoded = try JSONSerialization.jsonObject(with: JSONResponse.encoder.encode(problem)) as? NSDictionary
            #expect(byHand != nil && byHand == encoded, "\(kind) \(detail)")
        }
    }
}
