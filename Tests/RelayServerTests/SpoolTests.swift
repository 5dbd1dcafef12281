import Foundation
import RelayCore
import RelayStore
import Testing

@testable import DeliveryEngine
@testable import RelayServer

private let valid = EventRecord(
    keys: ["demo-project/version/7", "demo-project/id/ev-7"], project: "demo-project", eventID: "ev-7", format: "template-version",
    version: try! JSONDecoder().decode(TemplateVersion.self, from: Data(#"{"versionNumber":"7"}"#.utf8)), receivedAt: Date())

/// Files a crash, a full disk or a stray editor leaves behind.
private func plantDefects(in spool: String) throws {
    let directory = URL(fileURLWithPath: spool)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    var noKeys = valid
    noKeys.keys = []
    try JSONEncoder().encode(noKeys).write(to: directory.appendingPathComponent("no-keys.json"))
    try Data().write(to: directory.appendingPathComponent("empty.json"))
    try Data(#"{"keys":["demo-project/version/8"],"proj"#.utf8).write(to: directory.appendingPathComponent("partial.json"))
    try Data("half a write".utf8).write(to: directory.appendingPathComponent(".demo_project_version_9.json.8C1D"))
}

// MARK: Tests

@Test func recoveryQuarantinesWhatIsNotAnEventAndRemovesUnfinishedWrites() throws {
    try withTemporarySpool { spool in
        try plantDefects(in: spool)
        let files = try FileSpool(directory: spool)
        try files.write(valid)
        let recovery = files.recover()
        #expect(recovery.records == [valid])
        #expect(Set(recovery.quarantined.map(\.file)) == ["no-keys.json", "empty.json", "partial.json"])
        #expect(recovery.temporaryFilesRemoved == 1)
        // Moved aside, so the next start does not meet them again; the valid event stays.
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: spool)) == [valid.fileName, "quarantine"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: files.quarantine.path).count == 3)
        let again = files.recover()
        #expect(again.records == [valid] && again.quarantined.isEmpty && again.temporaryFilesRemoved == 0)
    }
}

@Test func aRelayStartsOverACorruptSpoolDeliversTheValidEventAndCountsTheRest() async throws {
    try await withSpool { spool in
        try plantDefects(in: spool)
        try FileSpool(directory: spool).write(valid)
        try await withLiveRelay(.standard.environment(["RC_RELAY_DELIVERY_SPOOL_DIRECTORY": spool])) { relay in
            #expect(try await relay.admin(.GET, "/healthz", token: nil).status == 200)
            try await eventually("the valid event is delivered") { await relay.emulator.messages.count == 1 }
            try await eventually("its file is removed") { spooledFiles(spool).isEmpty }
            #expect(try await relay.admin(.GET, "/metrics").text.contains("rc_relay_spool_quarantined_total 3"))
        }
    }
}

private func withTemporarySpool(_ body: (String) throws -> Void) throws {
    let spool = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-spool-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: spool) }
    try body(spool)
}
