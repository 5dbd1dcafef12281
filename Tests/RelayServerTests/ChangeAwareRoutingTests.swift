import AsyncHTTPClient
import FCMEmulator
import Foundation
import Testing

@testable import RelayServer

/// Change-aware routes end to end: templates published in the emulator's Remote Config, a webhook for the newest
/// version, and the FCM messages the emulator recorded.
@Suite struct ChangeAwareRoutingTests {
    static let routes = """
          - {name: everyone, topic: PUSH_RC, audience: {ios_ja: lang_ja, early_adopters: early}, data: {CONFIG_STATE: STALE}}
          - {name: checkout, topic: CHECKOUT, when: {changed: {parameters: ["checkout_*"]}}, data: {CONFIG_STATE: STALE}}
        """

    /// The welcome template, then each edit of its JSON object published as the next version.
    static func publishing(_ edits: [(inout [String: Any]) -> Void]) -> @Sendable (EmulatorState) async throws -> Void {
        let bodies = edits.map { edit -> Data in
            var object = (try? JSONSerialization.jsonObject(with: PollingTests.template())) as? [String: Any] ?? [:]
            edit(&object)
            return (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
        }
        return { state in
            try await state.templates.publish(project: "demo-project", template: try PollingTests.template())
            for body in bodies { try await state.templates.publish(project: "demo-project", template: body) }
        }
    }

    /// Remote Config at the emulator, and a minute for the webhook's answer: template fetches end within half of it,
    /// and under the thread sanitizer on a loaded machine the default's 2.5 s ran out once (a soak run, stop 40).
    static let remoteConfig = ["RC_RELAY_REMOTE_CONFIG_BASE_URL": "EMULATOR", "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "60"]

    static func setup(_ edits: [(inout [String: Any]) -> Void]) -> RelaySetup {
        RelaySetup.standard.routes(routes).environment(remoteConfig).seed(publishing(edits))
    }

    static func japaneseGreeting(_ object: inout [String: Any]) {
        var parameters = object["parameters"] as! [String: Any]
        var welcome = parameters["welcome_message"] as! [String: Any]
        welcome["conditionalValues"] = ["ios_ja": ["value": "いらっしゃいませ"]]
        parameters["welcome_message"] = welcome
        object["parameters"] = parameters
    }

    static func newDefault(_ object: inout [String: Any]) {
        var parameters = object["parameters"] as! [String: Any]
        parameters["welcome_message"] = ["defaultValue": ["value": "Hello"]]
        object["parameters"] = parameters
    }

    static func topics(_ relay: LiveRelay) async -> [String] {
        await relay.recordedMessages().map { ($0["topic"] as? String) ?? ($0["condition"] as? String) ?? "?" }
    }

    static func metric(_ relay: LiveRelay, _ prefix: String) async throws -> String {
        let text = try await relay.send(HTTPClientRequest(url: relay.relayURL + "/metrics")).text
        return text.split(separator: "\n").filter { $0.hasPrefix(prefix) }.joined(separator: "\n")
    }

    /// Sends the signed webhook for `version` and expects it accepted.
    static func publishWebhook(_ relay: LiveRelay, version: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let answer = try await relay.post(#"{"versionNumber": "\#(version)"}"#)
        #expect(answer.status == 200, sourceLocation: sourceLocation)
    }

    // MARK: Tests

    @Test func aChangeForOneLanguagePingsOnlyThatLanguage() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting])) { relay in
            let answer = try await relay.post(#"{"versionNumber": "2"}"#)
            #expect(answer.status == 200)
            #expect(await Self.topics(relay) == ["lang_ja"])  // not PUSH_RC, and not CHECKOUT: no checkout_* changed
            let record = try #require(try await relay.admin(.GET, "/admin/deliveries").deliveries.first)
            #expect(record.decision?.contains("audience narrowed to conditions ios_ja") == true)
            let changes = try await Self.metric(relay, "rc_relay_template_changes_total")
            #expect(changes.contains("outcome=\"known\"} 1"))
        }
    }

    @Test func aChangedDefaultPingsEveryone() async throws {
        try await withLiveRelay(Self.setup([Self.newDefault])) { relay in
            try await Self.publishWebhook(relay, version: 2)
            #expect(await Self.topics(relay) == ["PUSH_RC"])
        }
    }

    @Test func aChangeRuleFiresForItsParameters() async throws {
        let checkout: (inout [String: Any]) -> Void = { object in
            var parameters = object["parameters"] as! [String: Any]
            parameters["checkout_button"] = ["defaultValue": ["value": "green"]]
            object["parameters"] = parameters
        }
        try await withLiveRelay(Self.setup([checkout])) { relay in
            try await Self.publishWebhook(relay, version: 2)
            #expect(Set(await Self.topics(relay)) == ["PUSH_RC", "CHECKOUT"])
        }
    }

    @Test func aChangeInAVersionNoWebhookAnnouncedStillCounts() async throws {
        let checkout: (inout [String: Any]) -> Void = { object in
            var parameters = object["parameters"] as! [String: Any]
            parameters["checkout_button"] = ["defaultValue": ["value": "green"]]
            object["parameters"] = parameters
        }
        // 2: Japanese greeting; 3: a checkout parameter (its webhook never comes); 4: both.
        try await withLiveRelay(
            Self.setup([
                Self.japaneseGreeting, checkout,
                {
                    checkout(&$0)
                    Self.japaneseGreeting(&$0)
                },
            ])
        ) { relay in
            try await Self.publishWebhook(relay, version: 2)
            try await Self.publishWebhook(relay, version: 4)
            // 4 against 3 changed only the greeting; against 2, the last relayed, it added checkout_button too.
            let topics = await Self.topics(relay)
            #expect(topics.first == "lang_ja" && Set(topics.dropFirst()) == ["PUSH_RC", "CHECKOUT"] && topics.count == 3)
        }
    }

    @Test func whenTheTemplateCannotBeFetchedEveryoneIsPinged() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting])) { relay in
            await relay.emulator.inject(.init(status: 403, endpoint: "remoteConfig", count: 2))
            try await Self.publishWebhook(relay, version: 2)
            // Never fewer pings than needed: the whole audience of every route, the change rule's included.
            #expect(Set(await Self.topics(relay)) == ["PUSH_RC", "CHECKOUT"])
            let records = try await relay.admin(.GET, "/admin/deliveries").deliveries
            #expect(records.allSatisfy { $0.decision?.contains("the change is unknown") == true && $0.decision?.contains("403") == true })
            let changes = try await Self.metric(relay, "rc_relay_template_changes_total")
            #expect(changes.contains("outcome=\"unknown\"} 1"))
        }
    }

    @Test func aTemplateThatIsNotGooglesShapeMeansEveryone() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting])) { relay in
            await relay.emulator.inject(.init(endpoint: "remoteConfig", count: 2, body: #"{"parameters": [1, 2, 3]}"#))
            try await Self.publishWebhook(relay, version: 2)
            #expect(Set(await Self.topics(relay)) == ["PUSH_RC", "CHECKOUT"])
        }
    }

    @Test func withoutAChangeAwareRouteRemoteConfigIsNotAsked() async throws {
        try await withLiveRelay(.standard.environment(["RC_RELAY_REMOTE_CONFIG_BASE_URL": "EMULATOR"]).seed(Self.publishing([Self.japaneseGreeting])))
        {
            relay in
            try await Self.publishWebhook(relay, version: 2)
            #expect(await relay.emulator.stats.remoteConfigRequests == 0)
        }
    }

    @Test func templatesAreCachedAcrossVersions() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting, Self.newDefault])) { relay in
            try await Self.publishWebhook(relay, version: 2)
            try await Self.publishWebhook(relay, version: 3)
            #expect(await relay.emulator.stats.remoteConfigRequests == 3)  // 1, 2, then only 3: 2 is cached
            #expect(await Self.topics(relay) == ["lang_ja", "PUSH_RC"])  // 3 against 2: a default changed
        }
    }

    static func reorderedConditions(_ object: inout [String: Any]) {
        object["conditions"] = Array((object["conditions"] as! [Any]).reversed())
    }

    @Test func changedParametersTellAppsWhatChangedAndAStarWhenAnythingMayHave() async throws {
        let routes = """
              - {name: everyone, topic: PUSH_RC, data: {CONFIG_STATE: STALE, CHANGED: "{{changedParameters}}"}}
            """
        let setup = RelaySetup.standard.routes(routes).environment(["RC_RELAY_REMOTE_CONFIG_BASE_URL": "EMULATOR"])
        // 2: one parameter's Japanese value; 3: the conditions re-ordered (any parameter may resolve otherwise).
        try await withLiveRelay(setup.environment(Self.remoteConfig).seed(Self.publishing([Self.japaneseGreeting, Self.reorderedConditions]))) {
            relay in
            try await Self.publishWebhook(relay, version: 2)
            try await Self.publishWebhook(relay, version: 3)
            let data = await relay.recordedMessages().map { ($0["data"] as? [String: String])?["CHANGED"] }
            #expect(data == ["welcome_message", "*"])
        }
        // When the template cannot be fetched, nothing is claimed: `*`.
        try await withLiveRelay(setup.seed(Self.publishing([Self.japaneseGreeting]))) { relay in
            await relay.emulator.inject(.init(status: 500, endpoint: "remoteConfig", count: 20))
            try await Self.publishWebhook(relay, version: 2)
            #expect(await relay.recordedMessages().map { ($0["data"] as? [String: String])?["CHANGED"] } == ["*"])
        }
    }

    @Test func previewExplainsAVersionAndEveryRoutesDecisionWithoutSending() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting, Self.newDefault])) { relay in
            let answer = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "2"}}"#)
            #expect(answer.status == 200)
            let preview = try answer.decode(Contract.Preview.self)
            #expect(preview.change?.known == true && preview.change?.since == "1")
            #expect(preview.change?.parameters?.map(\.name) == ["welcome_message"])
            #expect(preview.change?.parameters?.first?.conditions == ["ios_ja"])
            #expect(preview.change?.changedParameters == ["welcome_message"])
            #expect(preview.routes.map(\.route) == ["everyone", "checkout"])
            #expect(preview.routes.map(\.fires) == [true, false])
            #expect(preview.routes.first?.targets == ["topic:lang_ja"])
            #expect(preview.requests.map(\.route) == ["everyone"])
            // Version 3 measured from 1: the default changed, so everyone.
            let since = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "3"}, "since": "1"}"#)
            let fromOne = try since.decode(Contract.Preview.self)
            #expect(fromOne.change?.since == "1" && fromOne.routes.first?.targets == ["topic:PUSH_RC"])
            // Against itself: nothing changed, so a change rule does not fire.
            let itself = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "3"}, "since": "3"}"#)
            let none = try itself.decode(Contract.Preview.self)
            #expect(none.change?.known == true && none.change?.parameters?.isEmpty == true && none.routes.map(\.fires) == [true, false])
            for bad in [#""since": "0""#, #""since": 2"#, #""since": "12x""#, #""since": "0012""#] {
                let refused = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "3"}, \#(bad)}"#)
                #expect(refused.status == 400, "\(bad)")
            }
            #expect(await relay.emulator.messages.isEmpty)
            // A preview is not a routed version: the metric counts only those.
            let changes = try await Self.metric(relay, "rc_relay_template_changes_total")
            #expect(!changes.contains("} 1") && !changes.contains("} 2"), "\(changes)")
        }
    }

    @Test func explainFetchesTheChangeOnlyWhenAsked() async throws {
        let setup = RelaySetup.standard.environment(Self.remoteConfig).seed(Self.publishing([Self.japaneseGreeting]))
        try await withLiveRelay(setup) { relay in
            let plain = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "2"}}"#).decode(Contract.Preview.self)
            #expect(plain.change == nil && plain.routes.first?.reason == "no change rule")
            #expect(await relay.emulator.stats.remoteConfigRequests == 0)
            let asked = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "2"}, "explain": true}"#)
            let explained = try asked.decode(Contract.Preview.self)
            #expect(explained.change?.known == true && explained.change?.parameters?.map(\.name) == ["welcome_message"])
            // A version Remote Config no longer has (or never had): the change is unknown, and says why.
            let gone = try await relay.admin(.POST, "/admin/preview", json: #"{"version": {"versionNumber": "40"}, "explain": true}"#)
            let unknown = try gone.decode(Contract.Preview.self)
            #expect(unknown.change?.known == false && unknown.change?.reason?.contains("40") == true)
            #expect(unknown.routes.first?.fires == true)
        }
    }

    @Test func aRetriedNarrowedPingGoesToTheAudienceItWentTo() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting])) { relay in
            await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
            try await Self.publishWebhook(relay, version: 2)
            let failed = try #require(try await relay.admin(.GET, "/admin/deliveries?status=failed").deliveries.first)
            #expect(failed.route == "everyone")
            let retried = try await relay.admin(.POST, "/admin/deliveries/\(failed.id)/retry")
            #expect(retried.status == 200)
            #expect(try retried.record.status == .accepted)
            #expect(await Self.topics(relay) == ["lang_ja"])
        }
    }

    @Test func aVersionWhoseTemplatesExpiredPingsEveryoneAndSaysWhy() async throws {
        // 302 versions: Remote Config keeps the last 300, so 1 and 2 are gone when a late webhook for 2 arrives.
        // (A closure of the parameter's type: an array of `@Sendable` function references would be cast at run time.)
        let edit: (inout [String: Any]) -> Void = { Self.japaneseGreeting(&$0) }
        let edits = Array(repeating: edit, count: 301)
        try await withLiveRelay(Self.setup(edits)) { relay in
            try await Self.publishWebhook(relay, version: 2)
            #expect(Set(await Self.topics(relay)) == ["PUSH_RC", "CHECKOUT"])
            let records = try await relay.admin(.GET, "/admin/deliveries").deliveries
            #expect(records.count == 2 && records.allSatisfy { $0.decision?.contains("template 2 could not be fetched") == true }, "\(records)")
        }
    }

    @Test func anOversizedTemplateOrAnOddConditionNameMeansEveryoneNeverACrash() async throws {
        try await withLiveRelay(Self.setup([Self.japaneseGreeting])) { relay in
            // Past the client's 4 MiB: refused while read, never buffered whole.
            let huge = #"{"parameters": {"a": {"defaultValue": {"value": ""# + String(repeating: "x", count: 4_300_000) + #""}}}}"#
            await relay.emulator.inject(.init(endpoint: "remoteConfig", count: 2, body: huge))
            try await Self.publishWebhook(relay, version: 2)
            #expect(Set(await Self.topics(relay)) == ["PUSH_RC", "CHECKOUT"])
            let records = try await relay.admin(.GET, "/admin/deliveries").deliveries
            #expect(records.allSatisfy { $0.decision?.contains("larger than") == true }, "\(records)")
        }
        // A condition named with quotes, spaces and non-ASCII is a name like any other: confined to it, but not mapped.
        let odd: (inout [String: Any]) -> Void = { object in
            var conditions = object["conditions"] as! [[String: Any]]
            conditions.append(["name": "it's \"odd\" — 日本", "expression": "device.language in ['ja']"])
            object["conditions"] = conditions
        }
        let oddValue: (inout [String: Any]) -> Void = { object in
            odd(&object)
            var parameters = object["parameters"] as! [String: Any]
            var welcome = parameters["welcome_message"] as! [String: Any]
            welcome["conditionalValues"] = ["it's \"odd\" — 日本": ["value": "やあ"]]
            parameters["welcome_message"] = welcome
            object["parameters"] = parameters
        }
        try await withLiveRelay(Self.setup([odd, oddValue])) { relay in
            try await Self.publishWebhook(relay, version: 3)
            #expect(await Self.topics(relay) == ["PUSH_RC"])  // not mapped in the audience: everyone; CHECKOUT: no checkout_*
            let record = try #require(try await relay.admin(.GET, "/admin/deliveries").deliveries.first)
            #expect(record.decision?.contains("has no audience topic") == true, "\(String(describing: record.decision))")
        }
    }
}
