import Foundation
import RelayCore
import Testing

/// HTTP targets (docs/targets.md): the `webhook:` key validated without ever showing the URL, a version's call made
/// beside the FCM pings, and its three bodies.
private let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()

private func webhook(_ url: String, format: String? = nil, secrets: [String]? = [secret]) -> RouteDefinition.Webhook {
    RouteDefinition.Webhook(url: .value(url), format: format, secrets: secrets?.map(SecretSource.value))
}

private func refusal(_ definition: RouteDefinition) -> RouteError? {
    do throws(RouteError) {
        _ = try Route(definition, index: 0)
        return nil
    } catch {
        return error
    }
}

private func template(_ parameters: [String: String], conditional: [String: [String: String]] = [:], version: Int64) -> RemoteConfigTemplate {
    var object: [String: Any] = ["version": ["versionNumber": String(version)]]
    object["parameters"] = parameters.mapValues { value -> [String: Any] in ["defaultValue": ["value": value]] }.merging(
        conditional.mapValues { values in ["defaultValue": ["value": "x"], "conditionalValues": values.mapValues { ["value": $0] }] }
    ) { first, _ in first }
    object["conditions"] = Set(conditional.values.flatMap(\.keys)).sorted().map { ["name": $0, "expression": "true"] }
    return try! RemoteConfigTemplate(json: try! JSONSerialization.data(withJSONObject: object))
}

private func httpCall(_ ping: Ping?) -> HTTPCall? {
    guard case .target(let message) = ping?.payload else { return nil }
    return message as? HTTPCall
}

private let version7 = TemplateVersion(
    versionNumber: 7, updateTime: "2026-12-04T10:00:00Z", updateUser: .init(email: "release@example.com"), description: "copy <b> & more",
    updateOrigin: "CONSOLE", updateType: "INCREMENTAL_UPDATE")

@Test func aTargetsURLIsHTTPSOrLoopbackAndNoErrorShowsItsPathOrQuery() {
    for url in ["https://example.com/hook", "http://127.0.0.1:9000/hook", "http://localhost/x", "http://[::1]:8080/x"] {
        #expect(refusal(RouteDefinition(name: "n", webhook: webhook(url))) == nil, "\(url)")
    }
    let cases: [(String, String)] = [
        ("http://example.com/services/KEEPME?token=KEEPME", "its scheme is http"), ("ftp://example.com/KEEPME", "its scheme is ftp"),
        ("https://user:KEEPME@example.com/x", "user or password"), ("/KEEPME", "not an absolute URL"),
    ]
    for (url, problem) in cases {
        let error = refusal(RouteDefinition(name: "n", webhook: webhook(url)))
        #expect(error?.key == "webhook.url" && error?.problem.contains(problem) == true, "\(url): \(String(describing: error))")
        #expect(!(error?.description.contains("KEEPME") ?? true), "\(url)")
    }
    #expect(refusal(RouteDefinition(name: "n", webhook: .init(format: "standard")))?.key == "webhook.url")
}

@Test func aStandardTargetSignsAndAChatTargetCannot() {
    #expect(refusal(RouteDefinition(name: "n", webhook: webhook("https://e.com/x", secrets: nil)))?.key == "webhook.secrets")
    #expect(refusal(RouteDefinition(name: "n", webhook: webhook("https://e.com/x", secrets: ["short"])))?.key == "webhook.secrets[0]")
    #expect(
        refusal(RouteDefinition(name: "n", webhook: webhook("https://e.com/x", secrets: Array(repeating: secret, count: 11))))?.key
            == "webhook.secrets")
    #expect(refusal(RouteDefinition(name: "n", webhook: webhook("https://hooks.slack.com/x", format: "slack")))?.key == "webhook.secrets")
    #expect(refusal(RouteDefinition(name: "n", webhook: webhook("https://hooks.slack.com/x", format: "slack", secrets: nil))) == nil)
    #expect(refusal(RouteDefinition(name: "n", webhook: webhook("https://chat.googleapis.com/x", format: "googleChat", secrets: []))) == nil)
    #expect(refusal(RouteDefinition(name: "n", webhook: webhook("https://e.com/x", format: "teams")))?.key == "webhook.format")
    var slow = webhook("https://e.com/x")
    slow.timeoutSeconds = 61
    #expect(refusal(RouteDefinition(name: "n", webhook: slow))?.key == "webhook.timeoutSeconds")
    var fast = webhook("https://e.com/x")
    fast.messagesPerSecond = 0.5
    #expect(refusal(RouteDefinition(name: "n", webhook: fast))?.key == "webhook.messagesPerSecond")
    let chat = try? Route(RouteDefinition(name: "n", webhook: webhook("https://e.com/x", format: "googleChat", secrets: nil)), index: 0)
    #expect(chat?.webhook?.messagesPerSecond == 1 && chat?.webhook?.timeout == .seconds(10) && chat?.webhook?.host == "e.com")
    #expect((try? Route(RouteDefinition(name: "n", webhook: webhook("https://e.com/x")), index: 0))?.webhook?.messagesPerSecond == 10)
}

@Test func aWebhookRouteSetsNoFCMKey() {
    let target = webhook("https://e.com/x")
    #expect(refusal(RouteDefinition(name: "n", topic: "PUSH_RC", webhook: target))?.key == "topic")
    #expect(refusal(RouteDefinition(name: "n", data: ["A": "b"], webhook: target))?.key == "data")
    #expect(refusal(RouteDefinition(name: "n", audience: ["c": "t"], webhook: target))?.key == "audience")
    #expect(refusal(RouteDefinition(name: "n", waves: .init(shards: 2, spreadSeconds: 60, topic: "T_{shard}"), webhook: target))?.key == "waves")
}

@Test func aVersionsCallDescribesItsChangeAndTheAudiencesItsPingsReach() throws {
    let table = try RouteTable([
        RouteDefinition(name: "hook", webhook: webhook("https://e.com/x")),
        .default,
        RouteDefinition(name: "ja", topic: "PUSH_JA", audience: ["lang_ja": "PUSH_JA"]),
    ])
    let diff = TemplateDiff(
        from: template(["a": "1", "gone": "x"], version: 6),
        to: template(["a": "2", "b": "3"], conditional: ["welcome": ["lang_ja": "ja"]], version: 7))
    let pings = table.pings(for: version7, project: "demo-project", change: .known(diff))
    // In route order, the call where its route is.
    #expect(pings.map(\.route) == ["hook", "default", "ja"])
    let call = try #require(httpCall(pings.first))
    #expect(call.id == HTTPCall.id(project: "demo-project", version: 7, route: "hook"))
    #expect(call.id.hasPrefix("msg_") && call.id.count == 36)
    #expect(call.id != HTTPCall.id(project: "demo-project", version: 8, route: "hook"))
    #expect(pings[0].payload.sender == "route:hook" && pings[1].payload.sender == "fcm")
    #expect(pings[0].payload.audience == PingAudience(kind: "webhook", name: "hook"))
    let notice = call.notice
    #expect(notice.audiences == ["topic:PUSH_RC", "topic:PUSH_JA"])
    #expect(notice.change == ChangeSummary(.known(diff), of: 7))
    #expect(notice.change?.since == "6")
    #expect(notice.change?.parameters.map(\.name) == ["a", "b", "gone", "welcome"])
    let event = try JSONSerialization.jsonObject(with: Data(call.body)) as! [String: Any]
    #expect(event["type"] as? String == "remoteconfig.template.updated" && event["timestamp"] as? String == "2026-12-04T10:00:00Z")
    let data = event["data"] as! [String: Any]
    #expect(data["versionNumber"] as? String == "7" && data["route"] as? String == "hook" && data["project"] as? String == "demo-project")
    // The body is the same every time it is made: a retry, another replica, a replan after a crash.
    #expect(table.pings(for: version7, project: "demo-project", change: .known(diff))[0].payload == pings[0].payload)
}

@Test func aWebhookRouteWithAChangeRuleIsCalledOnlyForItsChanges() throws {
    var definition = RouteDefinition(name: "checkout", when: .init(changed: .init(parameters: ["checkout_*"])), webhook: webhook("https://e.com/x"))
    let table = try RouteTable([definition])
    let other = TemplateDiff(from: template(["a": "1"], version: 1), to: template(["a": "2"], version: 2))
    #expect(table.pings(for: version7, project: "p", change: .known(other)).isEmpty)
    let mine = TemplateDiff(from: template(["checkout_flow": "1"], version: 1), to: template(["checkout_flow": "2"], version: 2))
    #expect(table.pings(for: version7, project: "p", change: .known(mine)).map(\.route) == ["checkout"])
    // Unknown: called, saying why.
    let unknown = table.pings(for: version7, project: "p", change: .unknown("template 6 could not be fetched"))
    let call = try #require(httpCall(unknown.first))
    #expect(call.notice.change?.known == false && call.notice.change?.reason == "template 6 could not be fetched")
    #expect(call.notice.changeLines == ["What changed is unknown: template 6 could not be fetched."])
    definition.debounceSeconds = 30
    #expect(
        try RouteTable([definition]).pings(for: version7, project: "p", change: .known(mine)).first?.schedule == PingSchedule(quiet: .seconds(30)))
}

@Test func aNoticeSaysWhoDidWhatInWordsCutToEachChatsLimits() throws {
    var rollback = version7
    rollback.updateType = "ROLLBACK"
    rollback.rollbackSource = 5
    let many = Dictionary(uniqueKeysWithValues: (0..<25).map { ("p\($0)", "1") })
    let diff = TemplateDiff(from: template([:], version: 6), to: template(many, version: 7))
    let notice = PublishNotice(version: rollback, project: "demo-project", change: .known(diff), audiences: [], route: "r")
    #expect(notice.headline == "release@example.com rolled demo-project back to version 5 (now version 7)")
    #expect(notice.changeLines.first?.hasSuffix("and 5 more") == true)
    #expect(notice.audienceLine == "No FCM ping for this version.")
    let slack = try JSONSerialization.jsonObject(with: Data(notice.body(.slack))) as! [String: Any]
    let blocks = slack["blocks"] as! [[String: Any]]
    #expect(blocks.map { $0["type"] as! String } == ["header", "section", "section", "context"])
    let said = (blocks[1]["text"] as! [String: Any])["text"] as! String
    #expect(said.contains("&lt;b&gt; &amp; more") && !said.contains("<b>"))
    var long = version7
    long.updateUser = .init(email: String(repeating: "a", count: 300) + "@example.com")
    let header =
        try JSONSerialization.jsonObject(
            with: Data(PublishNotice(version: long, project: "p", change: .notNeeded, audiences: [], route: "r").body(.slack))) as! [String: Any]
    #expect((((header["blocks"] as! [[String: Any]])[0]["text"] as! [String: Any])["text"] as! String).count == 150)
    let chat = try JSONSerialization.jsonObject(with: Data(notice.body(.googleChat))) as! [String: Any]
    #expect((chat["text"] as? String)?.hasPrefix("release@example.com rolled demo-project back") == true)
    #expect((chat["cardsV2"] as? [[String: Any]])?.count == 1)
}
