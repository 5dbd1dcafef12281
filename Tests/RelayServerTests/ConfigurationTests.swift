import FCMEmulator
import Foundation
import RelayCore
import RelayServer
import Testing

/// A key file the loader can read, made once per test.
private func keyFile() async throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-config-\(UUID().uuidString).json")
    try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "http://127.0.0.1:1/token", state: EmulatorState()).write(to: path)
    return path.path
}

private let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

private func base(_ key: String) -> String {
    """
    webhook: {secrets: ["\(secret)"]}
    fcm: {credentialsFile: "\(key)"}
    """
}

private func refusal(_ yaml: String, environment: [String: String] = [:]) -> ConfigurationError? {
    do {
        _ = try ConfigurationLoader(environment: environment).load(yaml: yaml)
        return nil
    } catch {
        return error
    }
}

// MARK: Tests

@Test func minimalFileGetsTheDocumentedDefaults() async throws {
    let settings = try ConfigurationLoader(environment: [:]).load(yaml: base(try await keyFile()))
    #expect(settings.host == "127.0.0.1")
    #expect(settings.port == 8080)
    #expect(settings.trustedProxies == TrustedProxies())
    #expect(settings.adminTokens.isEmpty && settings.adminPort == nil)
    #expect(settings.maxBodyBytes == 65_536)
    #expect(settings.projects[0].id == "demo-project")
    #expect(settings.fcmBaseURL == "https://fcm.googleapis.com")
    #expect(settings.projects[0].routes.routes.map(\.name) == ["default"])
    #expect(settings.verifier.tolerance == .seconds(300))
}

@Test func environmentOverridesTheFile() async throws {
    let key = try await keyFile()
    let settings = try ConfigurationLoader(environment: [
        "RC_RELAY_PORT": "9000", "RC_RELAY_HOST": "0.0.0.0", "RC_RELAY_FCM_PROJECT": "other",
        "RC_RELAY_ROUTES": "[{name: a, topic: A}, {name: b, condition: \"'x' in topics\"}]",
        "RC_RELAY_LOG_FORMAT": "json", "RC_RELAY_MAX_BODY_BYTES": "4096",
    ]).load(yaml: base(key) + "\nserver: {port: 8081}")
    #expect(settings.port == 9000)
    #expect(settings.host == "0.0.0.0")
    #expect(settings.projects[0].id == "other")
    #expect(settings.projects[0].routes.routes.map(\.name) == ["a", "b"])
    #expect(settings.logFormat == .json)
    #expect(settings.maxBodyBytes == 4096)
}

@Test func secretsComeFromValueEnvironmentOrFile() async throws {
    let key = try await keyFile()
    let secretFile = FileManager.default.temporaryDirectory.appendingPathComponent("secret-\(UUID().uuidString)")
    try (WebhookSecret.generate() + "\n").write(to: secretFile, atomically: true, encoding: .utf8)
    let yaml = """
        webhook:
          secrets:
            - value: \(secret)
            - env: MY_SECRET
            - file: \(secretFile.path)
        fcm: {credentialsFile: "\(key)"}
        """
    let settings = try ConfigurationLoader(environment: ["MY_SECRET": WebhookSecret.generate()]).load(yaml: yaml)
    #expect(settings.verifier.secrets.count == 3)
    let fromEnvironment = try ConfigurationLoader(environment: ["RC_RELAY_WEBHOOK_SECRETS": "\(secret) \(WebhookSecret.generate())"])
        .load(yaml: "fcm: {credentialsFile: \"\(key)\"}")
    #expect(fromEnvironment.verifier.secrets.count == 2)
}

@Test func mistakesNameTheKeyTheProblemAndTheFix() async throws {
    let key = try await keyFile()
    let cases: [(yaml: String, environment: [String: String], key: String)] = [
        (base(key) + "\nserver: {port: 70000}", [:], "server.port"),
        (base(key) + "\nserver: {port: eighty}", [:], "server.port"),
        (base(key), ["RC_RELAY_PORT": "eighty"], "server.port"),
        (base(key) + "\nserver: {webhookpath: /x}", [:], "server.webhookpath"),
        (base(key) + "\nsevrer: {}", [:], "sevrer"),
        (base(key) + "\nlog: {level: loud}", [:], "log.level"),
        (base(key) + "\nfcm2: {}", [:], "fcm2"),
        (base(key) + "\nroutes: []", [:], "routes"),
        (base(key) + "\nroutes: [{topic: /topics/PUSH_RC}]", [:], "routes[0].topic"),
        (base(key) + "\nroutes: [{topic: a, data: {N: 42}}]", [:], "routes[0].data.N"),
        (base(key) + "\nroutes: [{topic: a, data: {from: x}}]", [:], "routes[0].data.from"),
        (base(key) + "\nroutes:\n  - topic: a\n    data:\n      V: {{version}}", [:], "routes[0].data.V"),
        (base(key) + "\nroutes: [{topic: a, colour: red}]", [:], "routes[0].colour"),
        ("fcm: {credentialsFile: \"\(key)\"}", [:], "webhook.secrets"),
        ("webhook: {secrets: [{env: NOT_SET}]}\nfcm: {credentialsFile: \"\(key)\"}", [:], "webhook.secrets[0]"),
        ("webhook: {secrets: [{file: /nonexistent}]}\nfcm: {credentialsFile: \"\(key)\"}", [:], "webhook.secrets[0]"),
        ("webhook: {secrets: [\"whsec_short\"]}\nfcm: {credentialsFile: \"\(key)\"}", [:], "webhook.secrets[0]"),
        ("webhook: {secrets: [\"\(secret)\"]}\nfcm: {credentialsFile: /nonexistent.json}", [:], "fcm.credentialsFile"),
        (base(key), ["RC_RELAY_FCM_BASE_URL": "ftp://x"], "fcm.baseURL"),
        ("server: [", [:], "(file)"),
    ]
    for (yaml, environment, expectedKey) in cases {
        let error = refusal(yaml, environment: environment)
        #expect(error?.key == expectedKey, "\(yaml)")
        #expect(error?.problem.isEmpty == false)
        #expect(error?.fix.isEmpty == false)
    }
}

@Test func errorsNeverShowASecret() async throws {
    let key = try await keyFile()
    let badSecret = "whsec_TOPSECRET-not-base64!!"
    let errors = [
        refusal("webhook: {secrets: [\"\(badSecret)\"]}\nfcm: {credentialsFile: \"\(key)\"}"),
        refusal("webhook: {secrets: [{env: S}]}\nfcm: {credentialsFile: \"\(key)\"}", environment: ["S": badSecret]),
        refusal(base(key) + "\nserver: {port: \(badSecret)}"),
    ]
    for error in errors {
        #expect(error != nil)
        #expect(!"\(String(describing: error))".contains("TOPSECRET"))
    }
    #expect(!"\(try ConfigurationLoader(environment: [:]).load(yaml: base(key)).verifier.secrets)".contains("MfKQ9r8"))
}

@Test func suggestsTheRightSpellingOfAKey() async throws {
    let error = refusal(base(try await keyFile()) + "\nserver: {trustedproxies: [10.0.0.1]}")
    #expect(error?.fix.contains("trustedProxies") == true)
}

@Test func aSecretOrKeyPathThatNamesADeviceIsRefusedNotReadForever() async throws {
    let key = try await keyFile()
    let viaSecret = refusal(
        """
        webhook: {secrets: [{file: /dev/zero}]}
        fcm: {credentialsFile: "\(key)"}
        """)
    #expect(viaSecret?.key == "webhook.secrets[0]")
    #expect(viaSecret?.problem.contains("cannot be read, or is not a regular file of at most 1 MiB") == true)
    let viaKey = refusal(
        """
        webhook: {secrets: ["\(secret)"]}
        fcm: {credentialsFile: /dev/zero}
        """)
    #expect(viaKey?.key == "fcm.credentialsFile")
    #expect(viaKey?.problem.contains("not a regular file") == true)
    // A pipe with no writer would block a plain read forever.
    let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-fifo-\(UUID().uuidString)").path
    #expect(mkfifo(fifo, 0o600) == 0)
    defer { unlink(fifo) }
    let viaPipe = refusal(
        """
        webhook: {secrets: [{file: "\(fifo)"}]}
        fcm: {credentialsFile: "\(key)"}
        """)
    #expect(viaPipe?.key == "webhook.secrets[0]")
}

@Test func anEmptyKeyIsNamedInTheError() async throws {
    // Found by FuzzConfiguration: the error named no key at all ("configuration error at ''").
    let key = try await keyFile()
    let empty = refusal(base(key) + "\n\"\": 1\n")
    #expect(empty?.key == "(an empty key)")
    let nested = refusal(base(key) + "\nserver: {\"\": 1}\n")
    #expect(nested?.key == "server.(an empty key)")
    #expect(nested?.problem.contains("not a known setting") == true)
}
