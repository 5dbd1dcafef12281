import AsyncHTTPClient
import FCMEmulator
import Foundation
import Testing

@testable import RelayServer

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
    #expect(first.projects[0].id == "explicit")
    let second = try credentials("", ["GOOGLE_APPLICATION_CREDENTIALS": fromEnvironment])
    #expect(second.projects[0].id == "from-env")
    let third = try credentials("", [:])
    guard case .metadataServer(let url) = third.projects[0].credentials else {
        Issue.record("expected the metadata server")
        return
    }
    #expect(url == "http://metadata.google.internal")
    #expect(third.projects[0].id == nil)
    let host = try credentials("", ["GCE_METADATA_HOST": "127.0.0.1:9999"])
    guard case .metadataServer(let hostURL) = host.projects[0].credentials else {
        Issue.record("expected the metadata server")
        return
    }
    #expect(hostURL == "http://127.0.0.1:9999")
}

@Test func metadataServerCredentialsNeedNoKeyFile() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_FCM_METADATA_URL": "EMULATOR"]).withoutKeyFile()) { relay in
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

@Test func severalProjectsEachGetTheirOwnRoutesAndCredentials() async throws {
    try await withLiveRelay(
        .standard.secondProject().extraYAML { relay in
            """
            projects:
              - id: demo-project
              - id: game-b
                credentialsFile: "\(relay.gameBKeyFile)"
                routes:
                  - {name: b-stale, topic: B_RC, data: {STATE: STALE, V: "{{version}}", P: "{{project}}"}}
            """
        }
    ) { relay in
        let forB = try await relay.post(
            #"{"versionNumber":"11"}"#, headers: binaryHeaders(source: "//firebaseremoteconfig.googleapis.com/projects/game-b"))
        #expect(forB.status == 200)
        let forDemo = try await relay.post(#"{"versionNumber":"12"}"#, headers: binaryHeaders())
        #expect(forDemo.status == 200)
        let bare = try await relay.post(#"{"versionNumber":"13"}"#)
        #expect(try bare.delivered.event.project == "demo-project")
        let unknown = try await relay.post(
            #"{"versionNumber":"14"}"#, headers: binaryHeaders(source: "//firebaseremoteconfig.googleapis.com/projects/game-c"))
        #expect(unknown.status == 422)
        #expect(unknown.problem?.detail.contains("'demo-project', 'game-b'") == true)
        let recorded = await relay.emulator.messages
        #expect(recorded.map(\.project) == ["game-b", "demo-project", "demo-project"])
        let b = await relay.recordedMessages()[0]
        #expect(b["topic"] as? String == "B_RC")
        #expect(b["data"] as? [String: String] == ["STATE": "STALE", "V": "11", "P": "game-b"])
        #expect(await relay.emulator.stats.tokensIssued == 2)  // one token per project's service account
    }
}

@Test func projectsAreValidated() async throws {
    let key = try await keyFile(project: "a")
    let base = "webhook: {secrets: [\"\(secret)\"]}\nfcm: {credentialsFile: \"\(key)\"}\n"
    let cases: [(String, String)] = [
        ("projects: []", "projects"),
        ("projects: [{credentialsFile: \"\(key)\"}]", "projects[0].id"),
        ("projects: [{id: a}, {id: a}]", "projects[1].id"),
        ("projects: [{id: a, credentialsFile: /nonexistent}]", "projects[0].credentialsFile"),
        ("projects: [{id: a, routes: [{topic: /topics/x}]}]", "projects[0].routes[0].topic"),
        ("projects: [{id: a, routes: [{topic: x, colour: red}]}]", "projects[0].routes[0].colour"),
    ]
    for (yaml, expected) in cases {
        do {
            _ = try ConfigurationLoader(environment: [:]).load(yaml: base + yaml)
            Issue.record("expected a refusal for \(yaml)")
        } catch {
            #expect(error.key == expected, "\(yaml)")
        }
    }
    do {
        _ = try ConfigurationLoader(environment: [:]).load(
            yaml: base.replacingOccurrences(of: "fcm: {", with: "fcm: {project: a, ") + "projects: [{id: b}]")
        Issue.record("expected fcm.project to be refused beside projects")
    } catch {
        #expect(error.key == "fcm.project")
    }
}

@Test func googleApplicationCredentialsIsUsedWhenNoFileIsConfigured() async throws {
    try await withLiveRelay(.standard.environment(["GOOGLE_APPLICATION_CREDENTIALS": "KEYFILE"]).withoutKeyFile()) { relay in
        let answer = try await relay.post(#"{"versionNumber":9}"#)
        #expect(answer.status == 200)
        #expect(await relay.emulator.assertions.count == 1)  // a JWT-bearer grant: the key file was used
        #expect(await relay.emulator.messages.count == 1)
    }
}
