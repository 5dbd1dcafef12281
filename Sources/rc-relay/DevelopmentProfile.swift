import FCMEmulator
import Foundation
import Logging
import RelayCore
import RelayServer
import ServiceLifecycle

/// `rc-relay serve` with no configuration: an in-process FCM and Remote Config emulator, a generated secret, catch-up
/// polling every 10 s, pings shown in the log.
enum DevelopmentProfile {
    /// Runs the emulator and the relay on 127.0.0.1 until SIGINT or SIGTERM.
    static func run(environment: [String: String], logger: Logger) async throws {
        let state = EmulatorState()
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let emulator = try FCMEmulatorServer.buildApplication(
            state: state, port: Int(environment["RC_RELAY_DEV_EMULATOR_PORT"] ?? "") ?? 0, logger: logger,
            onServerRunning: { continuation.yield($0) })
        let emulatorGroup = ServiceGroup(services: [emulator], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await emulatorGroup.run() }
            var iterator = ports.makeAsyncIterator()
            guard let emulatorPort = await iterator.next() else { return }
            let emulatorURL = "http://127.0.0.1:\(emulatorPort)"
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-dev-\(getpid())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let keyFile = directory.appendingPathComponent("emulator-service-account.json")
            try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "\(emulatorURL)/token", state: state)
                .write(to: keyFile, options: .atomic)
            // Secrets and admin tokens the user set (RC_RELAY_WEBHOOK_SECRETS, RC_RELAY_ADMIN_TOKENS) are used as set, and
            // the banner's snippets read them from the environment instead of printing them; otherwise they are made here
            // and shown once.
            let ownSecrets = environment["RC_RELAY_WEBHOOK_SECRETS"].map { !$0.split(separator: " ").isEmpty } ?? false
            let ownTokens = environment["RC_RELAY_ADMIN_TOKENS"].map { !$0.split(separator: " ").isEmpty } ?? false
            let secret = environment["RC_RELAY_DEV_SECRET"] ?? WebhookSecret.generate()
            let adminToken = "dev-" + String(WebhookSecret.generate().dropFirst(6).filter { $0.isLetter || $0.isNumber }.prefix(32))
            // Remote Config's history: 42 versions. Catch-up polling adopts 42 on start, the banner's webhook announces
            // 42, and a publish through the emulator makes 43, which the poll pings.
            for number in 1...42 {
                try await state.templates.publish(
                    project: "demo-project", template: Data(#"{"parameters": {"welcome": {"defaultValue": {"value": "v\#(number)"}}}}"#.utf8),
                    origin: "CONSOLE")
            }
            // An HTTP target when RC_RELAY_DEV_TARGET_URL names one (docs/targets.md): each version is described to it,
            // signed with RC_RELAY_DEV_TARGET_SECRET (made here and shown once when unset) for the standard format.
            let target = environment["RC_RELAY_DEV_TARGET_URL"].flatMap { $0.isEmpty ? nil : $0 }
            let targetFormat = environment["RC_RELAY_DEV_TARGET_FORMAT"].flatMap { $0.isEmpty ? nil : $0 } ?? "standard"
            let targetSecret = environment["RC_RELAY_DEV_TARGET_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
            let madeTargetSecret = target != nil && targetFormat == "standard" && targetSecret == nil ? WebhookSecret.generate() : nil
            var routes = ""
            if target != nil {
                let secrets =
                    targetFormat != "standard"
                    ? "" : targetSecret != nil ? ", secrets: [{env: RC_RELAY_DEV_TARGET_SECRET}]" : ", secrets: [\"\(madeTargetSecret!)\"]"
                routes = """

                    routes:
                      - {name: default, topic: PUSH_RC, data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}}
                      - {name: notify, webhook: {url: {env: RC_RELAY_DEV_TARGET_URL}, format: "\(targetFormat)"\(secrets)}}
                    """
            }
            let yaml = """
                fcm: {project: demo-project, credentialsFile: "\(keyFile.path)", baseURL: "\(emulatorURL)"}
                remoteConfig: {baseURL: "\(emulatorURL)"}
                poll: {intervalSeconds: 10, graceSeconds: 5}
                webhook: {secrets: ["\(secret)"]}
                admin: {tokens: ["\(adminToken)"]}
                log: {pings: true}\(routes)
                """
            let settings = try ConfigurationLoader(environment: environment).load(yaml: yaml)
            let tracing = try RelayTracing.bootstrap(settings.tracing, logger: logger)
            let relay = try await RelayApplication.build(
                settings: settings, logger: logger,
                onServerRunning: { port in
                    var text = banner(
                        relayURL: "http://\(settings.host):\(port)", emulatorURL: emulatorURL,
                        secret: ownSecrets ? nil : secret, adminToken: ownTokens ? nil : adminToken)
                    if target != nil {
                        text +=
                            "HTTP target (route notify, \(targetFormat)): each version is described to RC_RELAY_DEV_TARGET_URL"
                            + (madeTargetSecret.map { ", signed with (shown once): \($0)" } ?? "") + "\n"
                    }
                    FileHandle.standardOutput.write(Data((text + "\n").utf8))
                })
            try await relay.runService(after: tracing.map { [$0] } ?? [])
            await emulatorGroup.triggerGracefulShutdown()
            try await group.waitForAll()
        }
    }

    /// What a newcomer needs: the secret (shown once, when made here) and a signed request to paste. A nil secret or
    /// token is the user's own, from the environment: the snippets read it from there and it is never printed.
    static func banner(relayURL: String, emulatorURL: String, secret: String?, adminToken: String?) -> String {
        let secretLine =
            secret.map { "Webhook secret (shown once): \($0)" }
            ?? "Webhook secrets: yours, from RC_RELAY_WEBHOOK_SECRETS (the snippet signs with the first)"
        let bearer = adminToken.map { "'Authorization: Bearer \($0)'" } ?? #""Authorization: Bearer ${RC_RELAY_ADMIN_TOKENS%% *}""#
        return """

            rc-relay development profile: FCM is an in-process emulator at \(emulatorURL); nothing leaves this machine.
            \(secretLine)

            Send a signed CloudEvent for version 42 (paste into a shell; needs openssl):
            \(curlExample(url: relayURL + RelaySettings.webhookPath, secret: secret.map { "'\($0)'" } ?? #""${RC_RELAY_WEBHOOK_SECRETS%% *}""#))

            Or publish a template in the emulator's Remote Config: no webhook comes, so catch-up polling pings it within 15 s:
            curl -s -X POST \(emulatorURL)/emulator/remote-config/demo-project/publish -d '{"parameters": {"welcome": {"defaultValue": {"value": "hi"}}}}'

            Pings the emulator recorded: curl -s \(emulatorURL)/emulator/messages
            The admin API\(adminToken == nil ? " (your RC_RELAY_ADMIN_TOKENS)" : " (token shown once)"): curl -s -H \(bearer) \(relayURL)/admin/deliveries
            The operator's page (sign in with the admin token): \(relayURL)/console
            Readiness and metrics:            curl -s \(relayURL)/readyz; curl -s \(relayURL)/metrics

            """
    }

    /// A shell snippet that signs at the moment it runs, so it stays valid past the 5-minute tolerance. `secret` is a
    /// shell word: a quoted secret, or an expansion that reads one from the environment.
    static func curlExample(url: String, secret: String) -> String {
        #"""
        SECRET=\#(secret); BODY='{"versionNumber":"42","updateType":"INCREMENTAL_UPDATE","updateOrigin":"CONSOLE"}'; \
        ID="msg_$(date +%s%N)"; TS="$(date +%s)"; \
        KEY="$(printf '%s' "${SECRET#whsec_}" | base64 -d | od -An -tx1 | tr -d ' \n')"; \
        SIG="$(printf '%s' "$ID.$TS.$BODY" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$KEY" -binary | base64)"; \
        curl -sS '\#(url)' -H 'content-type: application/json' \
          -H 'ce-specversion: 1.0' -H "ce-id: $ID" -H 'ce-type: google.firebase.remoteconfig.remoteConfig.v1.updated' \
          -H 'ce-source: //firebaseremoteconfig.googleapis.com/projects/demo-project' \
          -H "webhook-id: $ID" -H "webhook-timestamp: $TS" -H "webhook-signature: v1,$SIG" -d "$BODY"; echo
        """#
    }
}
