import FCMClient
import Foundation
import RelayServer
import Testing

private let report = DoctorReport(
    configuration: "rc-relay.yaml",
    checks: [
        DoctorCheck(check: "configuration", result: .ok, detail: "1 project(s), 1 route(s)"),
        DoctorCheck(project: "p", check: "credentials", result: .ok, detail: "key file k.json: a@p.iam.gserviceaccount.com, project_id p"),
        DoctorCheck(
            project: "p", check: "remote config", result: .fail,
            detail: "Remote Config answered 403 PERMISSION_DENIED: The caller does not have permission",
            fix: "grant roles/firebaseremoteconfig.viewer to a@p.iam.gserviceaccount.com in project p (IAM & Admin → Grant access)"),
        DoctorCheck(check: "store", result: .warn, detail: "no rc-relay tables yet", fix: "nothing: serve creates them at start"),
    ])

@Test func theTableHasACheckAResultAndWhatToDoWithinItsWidth() {
    for width in [60, 80, 120] {
        let lines = report.table(width: width).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "rc-relay doctor: rc-relay.yaml")
        #expect(lines[2].split(separator: " ") == ["CHECK", "RESULT", "WHAT", "TO", "DO"])
        #expect(lines.contains("project p"))
        #expect(lines.allSatisfy { $0.count <= max(width, 84) }, "\(lines)")
        #expect(lines.last { !$0.isEmpty } == "4 checks: 2 ok, 1 warn, 1 fail. Fix what failed, then run rc-relay doctor again.")
        // Every word of every cell is there, in order, whatever the wrapping.
        let words = lines.joined(separator: " ").split(separator: " ")
        #expect(words.contains("roles/firebaseremoteconfig.viewer") || width <= 80)
    }
    #expect(!report.table().contains("\u{1B}["))
    #expect(report.table(color: true).contains("\u{1B}[31;1mfail\u{1B}[0m:"))
    #expect(!report.ok)
}

@Test func theJSONReportIsWhatScriptsRead() throws {
    let object = try #require(try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
    #expect(object["ok"] as? Bool == false)
    #expect(object["configuration"] as? String == "rc-relay.yaml")
    let checks = try #require(object["checks"] as? [[String: Any]])
    #expect(checks.map { $0["result"] as? String } == ["ok", "ok", "fail", "warn"])
    #expect(checks[0]["project"] == nil && checks[0]["fix"] == nil)
    #expect(checks[2]["project"] as? String == "p")
}

@Test func wrappingKeepsEveryWordAndCutsOnlyWhatIsWiderThanTheColumn() {
    #expect(DoctorReport.wrap("one two three four", width: 9) == ["one two", "three", "four"])
    #expect(DoctorReport.wrap("  indented text here", width: 10) == ["  indented", "  text", "  here"])
    #expect(DoctorReport.wrap("abcdefghij", width: 4) == ["abcd", "efgh", "ij"])
    #expect(DoctorReport.wrap("", width: 4) == [""])
}

@Test func httpDatesAreReadAsGoogleWritesThem() {
    #expect(HTTPDate.parse("Thu, 26 Nov 2026 23:31:57 GMT") == Date(timeIntervalSince1970: 1_795_735_917))
    #expect(HTTPDate.parse("yesterday") == nil)
}
