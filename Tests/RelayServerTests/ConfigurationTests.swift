import AsyncHTTPClient
import Configuration
import FCMEmulator
import Foundation
import RelayCore
import Testing
import Yams

@testable import RelayServer

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

private func refusal(_ yaml: String, environment: [String: String] = [:], arguments: [String] = []) -> ConfigurationError? {
    do {
        _ = try ConfigurationLoader(environment: environment, arguments: arguments).load(yaml: yaml)
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
        (base(key) + "\ndelivery: {messagesPerSecond: 0}", [:], "delivery.messagesPerSecond"),
        (base(key), ["RC_RELAY_DELIVERY_MESSAGES_PER_SECOND": "20000"], "delivery.messagesPerSecond"),
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

/// Every mistake in a file is reported at once, as a compiler does, in the order of the file, each with its key,
/// problem and fix: one round of fixes, not six.
@Test func everyProblemInTheFileIsReportedAtOnce() async throws {
    let key = try await keyFile()
    let error = try #require(
        refusal(
            """
            webhook: {secrets: ["not-a-secret"]}
            fcm: {credentialsFile: "\(key)"}
            delivery: {maxAtempts: 3}
            routes:
              - {name: legacy, topic: /topics/PUSH_RC}
              - {name: data, topic: PUSH_RC, data: {COUNT: 3}}
              - {name: twice, topic: a}
              - {name: twice, topic: b}
              - {name: wide, condition: "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics"}
            """))
    #expect(
        error.all.map(\.key) == [
            "delivery.maxAtempts", "webhook.secrets[0]", "routes[0].topic", "routes[1].data.COUNT", "routes[3].name", "routes[4].condition",
        ])
    #expect(error.all.allSatisfy { !$0.problem.isEmpty && !$0.fix.isEmpty })
    #expect(error.all[0].fix == "did you mean 'maxAttempts'?")
    #expect(error.description.hasPrefix("6 configuration errors:\n"))
    #expect(!error.description.contains("not-a-secret"), "a refused secret is never shown")
    // The first problem is the error's own, so code that reads one error still reads the first.
    #expect(error.key == "delivery.maxAtempts")
}

/// A section with a value of the wrong type is reported with the others, not instead of them.
@Test func aWrongTypeInOneSectionDoesNotHideTheOthers() async throws {
    let key = try await keyFile()
    let error = try #require(
        refusal(
            """
            webhook: {secrets: ["\(secret)"]}
            fcm: {credentialsFile: "\(key)", timeoutSeconds: 500}
            server: {port: eighty}
            log: {level: loud}
            """))
    #expect(error.all.map(\.key) == ["server.port", "fcm.timeoutSeconds", "log.level"])
}

/// Flags win over variables, which win over the file; a flag that names no setting is refused with a suggestion.
@Test func flagsOverrideTheEnvironmentWhichOverridesTheFile() async throws {
    let key = try await keyFile()
    let loader = ConfigurationLoader(
        environment: ["RC_RELAY_PORT": "9000", "RC_RELAY_DELIVERY_HISTORY_SIZE": "50", "RC_RELAY_OIDC_AUDIENCES": "https://a\thttps://b"],
        arguments: ["--port", "9100", "--fcm-validate-only", "--delivery-spool-directory=/var/spool/x", "--trusted-proxies", "10.0.0.0/8", "::1"])
    let settings = try loader.load(
        yaml: base(key)
            + "\nserver: {port: 8081, maxBodyBytes: 2048}\noidc: {jwksURL: \"http://127.0.0.1:1/jwks\", allowedEmails: [a@b.iam.gserviceaccount.com]}"
    )
    #expect(settings.port == 9100, "a flag over the variable and the file")
    #expect(settings.historySize == 50, "a variable over the default")
    #expect(settings.maxBodyBytes == 2048, "the file where nothing else says")
    #expect(settings.validateOnly)
    #expect(settings.spoolDirectory == "/var/spool/x")
    #expect(settings.trustedProxies == TrustedProxies([try #require(TrustedProxies.Range("10.0.0.0/8")), try #require(TrustedProxies.Range("::1"))]))
    #expect(settings.oidc?.audiences == ["https://a", "https://b"], "any whitespace separates a variable's list")
    let refused = try #require(refusal(base(key), arguments: ["--delivery-spool-dir", "/x", "--server-port", "1"]))
    #expect(refused.all.map(\.key) == ["--delivery-spool-dir", "--server-port"])
    #expect(refused.all[0].fix.hasPrefix("did you mean --delivery-spool-directory?"))
    #expect(refused.all[1].fix.hasPrefix("did you mean --port?"))
    // A wrong value names where it came from.
    let wrong = try #require(refusal(base(key), arguments: ["--port", "eighty"]))
    #expect(wrong.problem.contains("(set by --port)"))
    // So does a value of the right type that a range check refuses, from a flag or a variable.
    let outOfRange = try #require(refusal(base(key), arguments: ["--port", "70000"]))
    #expect(outOfRange.key == "server.port" && outOfRange.problem == "70000 is not a TCP port (set by --port)")
    let fromVariable = try #require(refusal(base(key), environment: ["RC_RELAY_PORT": "70000"]))
    #expect(fromVariable.problem == "70000 is not a TCP port (set by RC_RELAY_PORT)")
    let fromFile = try #require(refusal(base(key) + "\nserver: {port: 70000}"))
    #expect(fromFile.problem == "70000 is not a TCP port", "the file's own values name no source")
}

/// The documented variable names are what swift-configuration's environment provider reads for each key.
@Test func everyVariableNameIsTheOneTheEnvironmentProviderReads() throws {
    for setting in EnvironmentOverrides.all where setting.key != "routes" {
        let sources = ConfigurationSources(file: Node([(Node, Node)]()), environment: [setting.variable: "x"], arguments: [])
        let value =
            setting.isList ? sources.reader.stringArray(forKey: ConfigKey(setting.key))?.first : sources.reader.string(forKey: ConfigKey(setting.key))
        #expect(value == "x", "\(setting.key) is read from \(setting.variable)")
        let flagged = ConfigurationSources(file: Node([(Node, Node)]()), environment: [:], arguments: ["--\(setting.flag)", "y"])
        let flagValue =
            setting.isList ? flagged.reader.stringArray(forKey: ConfigKey(setting.key))?.first : flagged.reader.string(forKey: ConfigKey(setting.key))
        #expect(flagValue == "y", "\(setting.key) is read from --\(setting.flag)")
    }
    #expect(EnvironmentOverrides.all.first { $0.key == "fcm.metadataURL" }?.variable == "RC_RELAY_FCM_METADATA_URL")
    #expect(EnvironmentOverrides.all.first { $0.key == "server.maxBodyBytes" }?.variable == "RC_RELAY_MAX_BODY_BYTES")
}

@Test func pollOnlyModeNeedsOnlyCredentialsAndAnInterval() async throws {
    let key = try await keyFile()
    let settings = try ConfigurationLoader(environment: [:]).load(yaml: "fcm: {credentialsFile: \"\(key)\"}\npoll: {intervalSeconds: 60}")
    #expect(settings.webhookAuth == .none)
    #expect(settings.poll?.interval == .seconds(60))
    #expect(settings.poll?.grace == .seconds(60))
    #expect(settings.remoteConfigBaseURL == "https://firebaseremoteconfig.googleapis.com")
    // Polling beside webhooks keeps the webhook's default; no polling means no poll settings.
    #expect(try ConfigurationLoader(environment: [:]).load(yaml: base(key) + "\npoll: {intervalSeconds: 60}").webhookAuth == .hmac)
    #expect(try ConfigurationLoader(environment: [:]).load(yaml: base(key)).poll == nil)
}

@Test func pollingMistakesAreNamed() async throws {
    let key = try await keyFile()
    let nothingRelayed = refusal("fcm: {credentialsFile: \"\(key)\"}\nwebhook: {auth: none}")
    #expect(nothingRelayed?.all.map(\.key) == ["webhook.auth"])
    #expect(nothingRelayed?.problem.contains("nothing would ever be relayed") == true)
    let noInterval = refusal(base(key) + "\npoll: {graceSeconds: 30}")
    #expect(noInterval?.all.map(\.key) == ["poll.intervalSeconds"])
    let tooOften = refusal(base(key) + "\npoll: {intervalSeconds: 1}")
    #expect(tooOften?.all.map(\.key) == ["poll.intervalSeconds"])
    let badURL = refusal(base(key) + "\nremoteConfig: {baseURL: \"ftp://example.com\"}")
    #expect(badURL?.all.map(\.key) == ["remoteConfig.baseURL"])
    #expect(refusal(base(key) + "\npoll: {intervalSecs: 60}")?.fix.contains("intervalSeconds") == true)
    // `any` needs both ways configured: secrets and ID-token checks.
    let anyWithoutOIDC = refusal(base(key).replacingOccurrences(of: "webhook: {", with: "webhook: {auth: any, "))
    #expect(anyWithoutOIDC?.all.map(\.key).contains { $0.hasPrefix("oidc") } == true)
}

/// A reload names each changed setting that is bound at start, and only those: each row changes one setting in the
/// file and expects exactly its key back.
@Test func aReloadNamesEachChangedSettingThatOnlyARestartApplies() async throws {
    let key = try await keyFile()
    defer { try? FileManager.default.removeItem(atPath: key) }
    let loader = ConfigurationLoader(environment: [:], arguments: [])
    let old = try loader.load(yaml: base(key))
    let rows: [(yaml: String, key: String?)] = [
        ("server: {port: 9999}", "server.port"),
        ("server: {idleTimeoutSeconds: 31}", "server.idleTimeoutSeconds"),
        ("server: {requestReadTimeoutSeconds: 11}", "server.requestReadTimeoutSeconds"),
        ("server: {readinessCacheSeconds: 6}", "server.readinessCacheSeconds"),
        ("delivery: {maxQueuedPings: 500}", "delivery.maxQueuedPings"),
        ("delivery: {maxDelaySeconds: 60}", "delivery.maxDelaySeconds"),
        ("delivery: {deadlineSeconds: 600}", "delivery.deadlineSeconds"),
        ("delivery: {historySize: 50}", "delivery.historySize"),
        ("fcm: {credentialsFile: \"\(key)\", timeoutSeconds: 20}", "fcm.timeoutSeconds"),
        // Applied at once: nothing to name.
        ("server: {maxBodyBytes: 2048}", nil),
        ("delivery: {maxAttempts: 3}", nil),
        ("routes:\n  - {name: other, topic: OTHER}", nil),
    ]
    for row in rows {
        var yaml = base(key)
        if row.yaml.hasPrefix("fcm:") {
            yaml = yaml.replacingOccurrences(of: "fcm: {credentialsFile: \"\(key)\"}", with: row.yaml)
        } else {
            yaml += "\n" + row.yaml
        }
        let new = try loader.load(yaml: yaml)
        #expect(RelaySettings.restartRequired(old, new) == (row.key.map { [$0] } ?? []), "\(row.yaml)")
    }
}

/// check-config validates the key file and the saved JWKS as `serve` reads them: a key file whose `private_key` is
/// the placeholder deploy/kubernetes/secret.example.yaml ships, or a JWKS file that is not one, is refused at load.
@Test func aKeyThatIsNoRSAKeyAndAJWKSFileThatIsNoneAreRefusedAtLoad() async throws {
    let key = try await keyFile()
    defer { try? FileManager.default.removeItem(atPath: key) }
    var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: key))) as? [String: Any])
    object["private_key"] = "-----BEGIN PRIVATE KEY-----\nREPLACE\n-----END PRIVATE KEY-----\n"
    let placeholder = key + ".placeholder.json"
    try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: placeholder))
    defer { try? FileManager.default.removeItem(atPath: placeholder) }
    let badKey = refusal(base(placeholder))
    #expect(badKey?.all.map(\.key) == ["fcm.credentialsFile"])
    #expect(badKey?.description.contains("not an RSA PEM key") == true)

    let jwks = key + ".jwks.json"
    try Data("not json".utf8).write(to: URL(fileURLWithPath: jwks))
    defer { try? FileManager.default.removeItem(atPath: jwks) }
    let oidc = """
        oidc: {audiences: ["https://relay.example.com/webhooks/remote-config"], allowedEmails: ["a@b.iam.gserviceaccount.com"], jwksFile: "\(jwks)"}
        """
    let badJWKS = refusal(base(key) + "\n" + oidc)
    #expect(badJWKS?.all.map(\.key) == ["oidc.jwksFile"])
    #expect(badJWKS?.description.contains("is not a JWKS") == true)
    // A real one passes.
    try Data(#"{"keys": []}"#.utf8).write(to: URL(fileURLWithPath: jwks))
    #expect(refusal(base(key) + "\n" + oidc) == nil)
}

/// configuration.md: `remoteConfig.timeoutSeconds` is Remote Config's read timeout, up to 120 s, whatever FCM's is:
/// the one outbound client waits between two reads for the longer of the two.
@Test func theOutboundReadTimeoutIsTheLongerOfFCMsAndRemoteConfigs() async throws {
    let key = try await keyFile()
    defer { try? FileManager.default.removeItem(atPath: key) }
    for (yaml, read) in [("remoteConfig: {timeoutSeconds: 60}", 60), ("remoteConfig: {timeoutSeconds: 3}", 10), ("", 10)] {
        let settings = try ConfigurationLoader(environment: [:]).load(yaml: base(key) + "\n" + yaml)
        let client = RelayApplication.clientConfiguration(settings)
        #expect(client.timeout.read?.nanoseconds == Int64(read) * 1_000_000_000, "\(yaml)")
    }
}

/// No secret in any output: settings printed or reflected, alone or inside another value (swift-service-lifecycle logs
/// its services at `debug`, and the reloader keeps the settings it started with), show no admin token or secret.
@Test func settingsPrintNoAdminTokenOrSecret() async throws {
    let key = try await keyFile()
    defer { try? FileManager.default.removeItem(atPath: key) }
    let token = "admin-token-that-must-never-print"
    let settings = try ConfigurationLoader(environment: [:]).load(yaml: base(key) + "\nadmin: {tokens: [\"\(token)\"]}")
    struct Holder { let settings: RelaySettings }
    let texts = [
        String(describing: settings), String(reflecting: settings), "\(Holder(settings: settings))", String(reflecting: Holder(settings: settings)),
    ]
    for text in texts {
        #expect(!text.contains(token), "\(text)")
        #expect(!text.contains(String(secret.dropFirst("whsec_".count))), "\(text)")
    }
    #expect(texts[0].contains("127.0.0.1:8080") && texts[0].contains("demo-project"))
}
