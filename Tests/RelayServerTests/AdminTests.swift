import Foundation
import RelayCore
import Testing

@testable import RelayServer

/// The admin API over real HTTP: the lock, each operation, and what it changes (or must not change) at the emulator.
@Suite struct AdminTests {
    @Test func theLockRefusesMissingAndWrongTokensAndAcceptsEveryConfiguredOne() async throws {
        let second = "second-token-for-rotation-0123456789"
        try await withLiveRelay(.standard.admin("{tokens: [\"\(LiveRelay.adminToken)\", \"\(second)\"]}")) { relay in
            let none = try await relay.admin(.GET, "/admin/info", token: nil)
            #expect(none.status == 401)
            #expect(none.problemType == "urn:rc-relay:problem:unauthorized")
            #expect(none.headers["www-authenticate"] == "Bearer realm=\"rc-relay admin\"")
            let wrong = try await relay.admin(.GET, "/admin/info", token: LiveRelay.adminToken + "x")
            #expect(wrong.status == 401)
            #expect(!wrong.text.contains(LiveRelay.adminToken))
            #expect(try await relay.admin(.GET, "/admin/info").status == 200)
            #expect(try await relay.admin(.GET, "/admin/info", token: second).status == 200)
            // A refused admin call sends nothing, even one that would.
            let send = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "7"}}"#, token: nil)
            #expect(send.status == 401)
            #expect(await relay.emulator.messages.isEmpty)
        }
    }

    @Test func withoutTokensTheAdminAPIDoesNotExist() async throws {
        try await withLiveRelay(.standard.admin(nil)) { relay in
            let answer = try await relay.admin(.GET, "/admin/info")
            #expect(answer.status == 404)
            #expect(answer.problemType == "urn:rc-relay:problem:not-found")
            #expect(answer.headers["content-type"] == "application/problem+json")
        }
    }

    @Test func aSeparateAdminListenerTakesAdminAndMetricsAndNothingElse() async throws {
        try await withLiveRelay(.standard.admin("{tokens: [\"\(LiveRelay.adminToken)\"], host: 127.0.0.1, port: 0}")) { relay in
            #expect(relay.adminURL != relay.relayURL)
            #expect(try await relay.admin(.GET, "/admin/info", base: relay.relayURL).status == 404)
            #expect(try await relay.admin(.GET, "/metrics", base: relay.relayURL).status == 404)
            #expect(try await relay.admin(.GET, "/admin/info").status == 200)
            #expect(try await relay.admin(.GET, "/metrics").status == 200)
            #expect(try await relay.admin(.GET, "/healthz").status == 404)
            #expect(try await relay.admin(.GET, "/healthz", base: relay.relayURL).status == 200)
            let webhook = try await relay.post(#"{"versionNumber": "3"}"#, url: relay.adminURL + RelaySettings.webhookPath)
            #expect(webhook.status == 404)
            #expect(await relay.emulator.messages.isEmpty)
        }
    }

    @Test func pathSpellingsDoNotGetAroundTheGate() async throws {
        try await withLiveRelay(.standard.admin("{tokens: [\"\(LiveRelay.adminToken)\"], host: 127.0.0.1, port: 0}")) { relay in
            for path in ["//admin/info", "/admin//info", "/metrics/", "//metrics"] {
                let answer = try await relay.admin(.GET, path, base: relay.relayURL)
                #expect(answer.status == 404, "\(path) on the public listener")
            }
        }
        try await withLiveRelay { relay in
            for path in ["//admin/info", "/admin//info", "/admin/info/"] {
                let answer = try await relay.admin(.GET, path, token: nil)
                #expect(answer.status == 401, "\(path) without a token")
            }
            let send = try await relay.admin(.POST, "/admin//send", json: #"{"version": {"versionNumber": "7"}}"#, token: nil)
            #expect(send.status == 401)
            #expect(await relay.emulator.messages.isEmpty)
        }
        try await withLiveRelay(.standard.admin(nil)) { relay in
            let answer = try await relay.admin(.GET, "//admin/info")
            #expect(answer.status == 404)
        }
    }

    @Test func infoAndRoutesShowWhatRunsWithoutSecrets() async throws {
        try await withLiveRelay(
            .standard.routes(
                """
                  - {name: stale, topic: PUSH_RC, data: {CONFIG_STATE: STALE, V: "{{version}}"}}
                  - {name: rollbacks, condition: "'ios' in topics && 'beta' in topics", when: {updateTypes: [ROLLBACK]}, android: {priority: NORMAL}}
                  - {name: checkout, topic: CHECKOUT, when: {changed: {parameters: ["checkout_*"], conditions: [ios_ja]}}, audience: {ios_ja: lang_ja}}
                """)
        ) { relay in
            let info = try await relay.admin(.GET, "/admin/info").decode(Components.Schemas.Info.self)
            #expect(info.name == "rc-relay")
            #expect(info.version == RelayApplication.version)
            #expect(info.projects == ["demo-project"])
            let routes = try await relay.admin(.GET, "/admin/routes")
            #expect(routes.status == 200)
            let effective = try routes.decode(Components.Schemas.EffectiveRoutes.self)
            let project = try #require(effective.projects.first)
            #expect(project.routes.map(\.name) == ["stale", "rollbacks", "checkout"])
            // A change-aware route is shown as validated, what it is for and its audience included.
            let checkout = try #require(project.routes.last)
            #expect(checkout.when?.changed?.parameters == ["checkout_*"] && checkout.when?.changed?.conditions == ["ios_ja"])
            #expect(checkout.audience?.additionalProperties == ["ios_ja": "lang_ja"])
            #expect(project.routes.first?.audience == nil && project.routes.first?.when == nil)
            #expect(project.credentials.kind == .keyFile)
            #expect(effective.webhook.secrets == 1)
            #expect(!routes.text.contains(relay.secret) && !routes.text.contains(String(relay.secret.dropFirst(6))))
            #expect(!routes.text.contains("PRIVATE KEY"))
        }
    }

    @Test func previewShowsExactlyWhatAWebhookThenSendsAndSendsNothing() async throws {
        try await withLiveRelay { relay in
            let preview = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "42", "updateType": "ROLLBACK"}}"#)
            #expect(preview.status == 200)
            let requests = try preview.decode(Contract.Preview.self).requests
            #expect(requests.count == 1)
            #expect(requests.first?.url.hasSuffix("/v1/projects/demo-project/messages:send") == true)
            #expect(await relay.emulator.messages.isEmpty)
            // The body is a free-form object in the contract (exactly what would be sent): compared as JSON.
            let body = try #require((preview.json["requests"] as? [[String: Any]])?.first?["body"] as? [String: Any])
            let previewed = try #require(body["message"] as? NSDictionary)
            #expect(try await relay.post(#"{"versionNumber": "42", "updateType": "ROLLBACK"}"#).status == 200)
            let sent = await relay.recordedMessages()
            #expect(sent.count == 1)
            #expect(previewed == sent[0] as NSDictionary)
        }
    }

    @Test func previewTakesASampleCloudEventAndRefusesBadInput() async throws {
        try await withLiveRelay { relay in
            let event =
                #"{"event": {"specversion": "1.0", "id": "e1", "source": "\#(demoSource)", "type": "\#(updatedType)", "data": {"versionNumber": "9"}}}"#
            let preview = try await relay.admin(.POST, "/admin/preview", json: event)
            #expect(try preview.decode(Contract.Preview.self).versionNumber == "9")
            let neither = try await relay.admin(.POST, "/admin/preview", json: "{}")
            #expect(neither.status == 400)
            #expect(neither.problemType == "urn:rc-relay:problem:invalid-request")
            let notJSON = try await relay.admin(.POST, "/admin/preview", json: "{nope")
            #expect(notJSON.status == 400)
            let unknown = try await relay.admin(.POST, "/admin/preview", json: #"{"project": "nope", "version": {"versionNumber": 1}}"#)
            #expect(unknown.status == 404)
            #expect(unknown.problemType == "urn:rc-relay:problem:not-found")
        }
    }

    @Test func sendNowDryRunAndToOneDevice() async throws {
        try await withLiveRelay(
            .standard.routes(
                """
                  - {name: a, topic: A}
                  - {name: b, topic: B}
                """)
        ) { relay in
            let dry = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "5"}, "route": "b", "validateOnly": true}"#)
            #expect(dry.status == 200)
            let first = try #require(try dry.deliveries.first)
            #expect(first.status == .validated)
            #expect(first.origin == .send)
            #expect(await relay.emulator.stats.validatedOnly == 1)
            #expect(await relay.emulator.stats.accepted == 0)

            let device = try await relay.admin(
                .POST, "/admin/send", json: #"{"version": {"versionNumber": "5"}, "route": "a", "token": "\#(deviceToken)"}"#)
            #expect(try device.deliveries.first?.target == "token")
            let sent = await relay.recordedMessages()
            #expect(sent.count == 1)
            #expect(sent.first?["token"] as? String == deviceToken)
            #expect(sent.first?["topic"] == nil)

            let all = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "6"}}"#)
            #expect(try all.deliveries.count == 2)
            let unknown = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "6"}, "route": "zzz"}"#)
            #expect(unknown.status == 404)
            let deviceWithoutRoute = try await relay.admin(
                .POST, "/admin/send", json: #"{"version": {"versionNumber": "6"}, "token": "\#(deviceToken)"}"#)
            #expect(deviceWithoutRoute.status == 400)
            #expect(deviceWithoutRoute.problemType == "urn:rc-relay:problem:invalid-request")
            #expect(await relay.recordedMessages().count == 3)
        }
    }

    @Test func aDryRunOrAnAdminSendNeverSilencesARealPing() async throws {
        try await withLiveRelay { relay in
            // A dry run, a device test ping and a real admin send of far newer versions than any publish.
            _ = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "999999"}, "validateOnly": true}"#)
            _ = try await relay.admin(
                .POST, "/admin/send", json: #"{"version": {"versionNumber": "999998"}, "route": "default", "token": "\#(deviceToken)"}"#)
            _ = try await relay.admin(.POST, "/admin/send", json: #"{"version": {"versionNumber": "999997"}}"#)
            // A real publish whose first attempt fails must retry and reach devices, not stand down as superseded.
            await relay.emulator.inject(.init(status: 503))
            let answer = try await relay.post(#"{"versionNumber":7}"#)
            #expect(answer.status == 503)
            let report = try await relay.settledDelivery(version: 7)
            #expect(report.status == .accepted)
            #expect(report.attempts.count == 2)
            let data = await relay.recordedMessages().compactMap { $0["data"] as? [String: String] }
            #expect(data.contains { $0["CONFIG_VERSION"] == "7" })
        }
    }

    @Test func adminBodiesAreBoundedLikeWebhooks() async throws {
        try await withLiveRelay(.standard.environment(["RC_RELAY_MAX_BODY_BYTES": "2048"])) { relay in
            let large = #"{"version": {"versionNumber": "5", "description": "\#(String(repeating: "x", count: 4096))"}}"#
            let answer = try await relay.admin(.POST, "/admin/send", json: large)
            #expect(answer.status == 413)
            #expect(answer.problemType == "urn:rc-relay:problem:body-too-large")
            #expect(await relay.emulator.stats.sendRequests == 0)
            #expect(try await relay.admin(.POST, "/admin/preview", json: large).status == 413)
        }
    }

    @Test func deliveriesListFilterShowHistoryAndRetryADeadPing() async throws {
        try await withLiveRelay { relay in
            await relay.emulator.inject(.init(status: 503, count: 3))
            let failed = try await relay.post(#"{"versionNumber": "11"}"#)
            #expect(failed.status == 503)
            let id = try #require(try await relay.settledDeliveries(version: 11).first?.id)

            let dead = try await relay.admin(.GET, "/admin/deliveries?status=dead")
            #expect(try dead.deliveries.map(\.id) == [id])
            // Each decodes as a delivery list (throwing if not one), and it is empty.
            #expect(try await relay.admin(.GET, "/admin/deliveries?status=accepted").deliveries.isEmpty)
            #expect(try await relay.admin(.GET, "/admin/deliveries?version=12").deliveries.isEmpty)
            #expect(try await relay.admin(.GET, "/admin/deliveries?status=nonsense").status == 400)

            let one = try await relay.admin(.GET, "/admin/deliveries/\(id)").record
            #expect(one.status == .dead)
            #expect(one.attempts.count == 3)
            #expect(one.attempts.allSatisfy { $0.httpStatus == 503 })
            #expect(one.error?.httpStatus == 503)

            let retried = try await relay.admin(.POST, "/admin/deliveries/\(id)/retry")
            #expect(retried.status == 200)
            let retry = try retried.record
            #expect(retry.status == .accepted)
            #expect(retry.retryOf == id)
            #expect(retry.origin == .retry)
            #expect(await relay.recordedMessages().count == 1)
            let again = try await relay.admin(.POST, "/admin/deliveries/\(retry.id)/retry")
            #expect(again.status == 409)
            #expect(again.problemType == "urn:rc-relay:problem:not-retryable")
            #expect(try await relay.admin(.GET, "/admin/deliveries/nope").status == 404)
            #expect(await relay.recordedMessages().count == 1)
        }
    }

    @Test func aFailedPingIsRetriedButADevicePingIsNot() async throws {
        try await withLiveRelay { relay in
            await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
            let failed = try await relay.post(#"{"versionNumber": "21"}"#)
            #expect(failed.status == 200)
            let delivered = try failed.delivered
            #expect(delivered.status == .failed)
            let id = try #require(delivered.deliveries.first?.id)
            let retried = try await relay.admin(.POST, "/admin/deliveries/\(id)/retry")
            #expect(retried.status == 200)
            #expect(try retried.record.status == .accepted)
            #expect((await relay.recordedMessages().first?["data"] as? [String: Any])?["CONFIG_STATE"] as? String == "STALE")

            await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
            let device = try await relay.admin(
                .POST, "/admin/send", json: #"{"version": {"versionNumber": "22"}, "route": "default", "token": "phone-1"}"#)
            let deviceRecord = try #require(try device.deliveries.first)
            #expect(deviceRecord.status == .failed)
            let refused = try await relay.admin(.POST, "/admin/deliveries/\(deviceRecord.id)/retry")
            #expect(refused.status == 409)
            #expect(refused.problemType == "urn:rc-relay:problem:not-retryable")
            #expect(refused.problem?.detail.contains("device") == true)
            #expect(!refused.text.contains("phone-1"))
            #expect(await relay.recordedMessages().count == 1)
        }
    }

    @Test func reloadAppliesANewFileAndRefusesABadOneKeepingTheOld() async throws {
        try await withLiveRelay(.standard.configFile()) { relay in
            let path = try #require(relay.configPath)
            let original = try String(contentsOfFile: path, encoding: .utf8)
            try (original + "\nroutes:\n  - {name: fresh, topic: FRESH}\n").write(toFile: path, atomically: true, encoding: .utf8)
            let reloaded = try await relay.admin(.POST, "/admin/reload")
            #expect(reloaded.status == 200)
            #expect(try reloaded.decode(Components.Schemas.Reloaded.self).restartRequired == [])
            #expect(try await relay.post(#"{"versionNumber": "1"}"#).status == 200)
            #expect(await relay.recordedMessages().first?["topic"] as? String == "FRESH")

            try (original + "\nroutes:\n  - {name: broken, topic: \"no spaces allowed\"}\n").write(toFile: path, atomically: true, encoding: .utf8)
            let refused = try await relay.admin(.POST, "/admin/reload")
            #expect(refused.status == 422)
            #expect(refused.problemType == "urn:rc-relay:problem:invalid-configuration")
            #expect(refused.problem?.detail.contains("routes[0].topic") == true)
            #expect(try await relay.post(#"{"versionNumber": "2"}"#).status == 200)
            #expect(await relay.recordedMessages().last?["topic"] as? String == "FRESH")
            #expect(try await relay.admin(.GET, "/admin/info").decode(Components.Schemas.Info.self).configuration.reloads == 1)

            // A setting only a restart applies is named, and the rest of the file still applies.
            try (original + "\ndelivery: {historySize: 50}\nroutes:\n  - {name: later, topic: LATER}\n").write(
                toFile: path, atomically: true, encoding: .utf8)
            let partly = try await relay.admin(.POST, "/admin/reload")
            #expect(partly.status == 200)
            #expect(try partly.decode(Components.Schemas.Reloaded.self).restartRequired == ["delivery.historySize"])
            #expect(try await relay.post(#"{"versionNumber": "3"}"#).status == 200)
            #expect(await relay.recordedMessages().last?["topic"] as? String == "LATER")
            // The same file again: the running process still has the old size, so the restart is still required.
            let again = try await relay.admin(.POST, "/admin/reload")
            #expect(try again.decode(Components.Schemas.Reloaded.self).restartRequired == ["delivery.historySize"])
            // Back to what it started with: nothing waits for a restart.
            try original.write(toFile: path, atomically: true, encoding: .utf8)
            let back = try await relay.admin(.POST, "/admin/reload")
            #expect(try back.decode(Components.Schemas.Reloaded.self).restartRequired == [])
        }
    }

    @Test func reloadWithoutAFileIsRefused() async throws {
        try await withLiveRelay { relay in
            let answer = try await relay.admin(.POST, "/admin/reload")
            #expect(answer.status == 422)
        }
    }
}

/// A registration token of FCM's shape (an installation ID, then `APA91b…`): the emulator refuses any other, as FCM does.
private let deviceToken = "cAAAAAAAAAAAAAAAAAAAAA:APA91b" + String(repeating: "x", count: 130)
