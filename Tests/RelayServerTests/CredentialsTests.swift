import AsyncHTTPClient
import FCMEmulator
import Foundation
import RelayServer
import Testing

private let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

private func keyFile(project: String) async throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-adc-\(UUID().uuidString).json")
    try await ServiceAccountFactory.make(project: project, tokenURI: "http://127.0.0.1:1/token", state: EmulatorState()).write(to: path)
    return path.path
}

private func credentials(_ yaml: String, _ environment: [String: String]) throws -> RelaySettings {
    try ConfigurationLoader(environment: environment).load(yaml: "webhook: {secrets: [\"\(secret)\"]}\n" + yaml)
}

// MARK: Tests

@Test func credentialsFollowTheApplicationDefaultOrder() async throws {
    let explicit = try await keyFile(project: "explicit")
    let fromEnvironment = try await keyFile(project: "from-env")
    let first = try credentials("fcm: {credentialsFile: \"\(explicit)\"}", ["GOOGLE_APPLICATION_CREDENTIALS": fromEnvironment])
    #expect(first.project == "explicit")
    let second = try credentials("", ["GOOGLE_APPLICATION_CREDENTIALS": fromEnvironment])
    #expect(second.project == "from-env")
    let third = try credentials("", [:])
    guard case .metadataServer(let url) = third.credentials else { Issue.record("expected the metadata server"); return }
    #expect(url == "http://metadata.google.internal")
    #expect(third.project == nil)
    let host = try credentials("", ["GCE_METADATA_HOST": "127.0.0.1:9999"])
    guard case .metadataServer(let hostURL) = host.credentials else { Issue.record("expected the metadata server"); return }
    #expect(hostURL == "http://127.0.0.1:9999")
}

@Test func metadataServerCredentialsNeedNoKeyFile() async throws {
    try await withLiveRelay(environment: ["RC_RELAY_FCM_METADATA_URL": "EMULATOR"], useKeyFile: false) { relay in
        let answer = try await relay.post(#"{"versionNumber":8}"#)
        #expect(answer.status == 200)
        #expect(await relay.emulator.messages.count == 1)
        #expect(await relay.emulator.messages.first?.project == "demo-project")
        #expect(await relay.emulator.assertions.isEmpty)  // no key, no JWT assertion
        #expect(await relay.emulator.stats.tokenRequests == 1)
    }
}

@Test func metadataServerRequiresTheFlavorHeader() async throws {
    try await withLiveRelay { relay in
        var request = HTTPClientRequest(url: relay.emulatorURL + "/computeMetadata/v1/instance/service-accounts/default/token")
        request.method = .GET
        #expect(try await relay.send(request).status == 403)
        request.headers.add(name: "Metadata-Flavor", value: "Google")
        let answer = try await relay.send(request)
        #expect(answer.status == 200)
        #expect((answer.json["access_token"] as? String)?.hasPrefix("ya29.") == true)
    }
}
