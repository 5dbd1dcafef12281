import Foundation
import RelayCore
import Testing

private let version42 = TemplateVersion(
    versionNumber: 42, updateTime: "2026-11-21T09:14:03.512Z", updateUser: .init(name: "Dana Ops", email: "dana@example.com"),
    description: "Raise the daily reward", updateOrigin: "CONSOLE", updateType: "INCREMENTAL_UPDATE")

private func route(_ definition: RouteDefinition) throws -> Route { try Route(definition, index: 0) }

private func json(_ value: some Encodable) throws -> NSDictionary {
    try JSONSerialization.jsonObject(with: try JSONEncoder().encode(value)) as! NSDictionary
}

private func expectRefusal(_ key: String, _ definition: RouteDefinition, sourceLocation: SourceLocation = #_sourceLocation) {
    do throws(RouteError) {
        _ = try Route(definition, index: 0)
        Issue.record("expected a refusal at \(key)", sourceLocation: sourceLocation)
    } catch {
        #expect(error.key == key, sourceLocation: sourceLocation)
        #expect(!error.fix.isEmpty, sourceLocation: sourceLocation)
    }
}

// MARK: Tests

@Test func defaultRouteIsTheDocumentedSilentPing() throws {
    let message = try route(.default).message(for: version42, project: "demo-project")
    let expected = (try JSONSerialization.jsonObject(with: try sample("fcm-silent-ping-example.json")) as! NSDictionary)["message"] as! NSDictionary
    #expect(try json(message) == expected)
}

@Test func theWrittenJSONIsTheEncodedMessageAndEscapesStrings() throws {
    let tricky = TemplateVersion(
        versionNumber: 7, updateTime: "2026-11-21T09:14:03.512Z", updateUser: .init(name: "Ana \"Q\" \\ Ops", email: "a@example.com"),
        description: "line one\nline\ttwo \u{01} — emoji 🎉 / slash", updateOrigin: "CONSOLE", updateType: "ROLLBACK")
    let routes = [
        RouteDefinition.default,
        RouteDefinition(
            condition: "'ios' in topics && 'beta' in topics", data: ["D": "{{description}}", "E": "{{authorEmail}}", "V": "{{version}}"]),
    ]
    for definition in routes {
        for token in [nil, "device-token-1"] {
            let message = try route(definition).message(for: tricky, project: "demo-project", token: token)
            let written = try JSONSerialization.jsonObject(with: Data(message.json)) as! NSDictionary
            #expect(written == (try json(message)))
        }
    }
    let escaped = String(
        decoding: try route(RouteDefinition(topic: "t", data: ["D": "{{description}}"])).message(for: tricky, project: "p").json, as: UTF8.self)
    #expect(escaped.contains(#"line one\nline\ttwo \u0001 — emoji 🎉 / slash"#))
}

@Test func fillsPlaceholdersFromTheVersion() throws {
    let r = try route(
        RouteDefinition(
            topic: "t",
            data: [
                "V": "v{{version}}", "T": "{{updateType}}", "O": "{{updateOrigin}}", "AT": "{{updateTime}}", "P": "{{ project }}",
                "E": "{{authorEmail}}", "D": "{{description}}", "R": "{{rollbackSource}}",
            ]))
    let data = r.message(for: version42, project: "demo-project").data
    #expect(
        data == [
            "V": "v42", "T": "INCREMENTAL_UPDATE", "O": "CONSOLE", "AT": "2026-11-21T09:14:03.512Z", "P": "demo-project",
            "E": "dana@example.com", "D": "Raise the daily reward", "R": "",
        ])
}

@Test func cutsLongFieldsToTheirBudget() throws {
    var version = version42
    version.description = String(repeating: "é", count: 300)  // 600 bytes
    let data = try route(RouteDefinition(topic: "t", data: ["D": "{{description}}"])).message(for: version, project: "p").data
    #expect(data["D"]?.utf8.count == 256)
}

@Test func filtersOnUpdateTypeAndOrigin() throws {
    let rollbacks = try route(RouteDefinition(topic: "t", when: .init(updateTypes: ["ROLLBACK"])))
    let console = try route(RouteDefinition(topic: "t", when: .init(origins: ["CONSOLE", "REST_API"])))
    #expect(!rollbacks.matches(version42))
    #expect(console.matches(version42))
    var rollback = version42
    rollback.updateType = "ROLLBACK"
    rollback.updateOrigin = "ADMIN_SDK_NODE"
    #expect(rollbacks.matches(rollback))
    #expect(!console.matches(rollback))
}

@Test func routeTableKeepsOrderAndSkipsUnmatched() throws {
    let table = try RouteTable([
        .default,
        RouteDefinition(
            name: "rollbacks", condition: "'ios' in topics || 'android' in topics", data: ["KIND": "rollback"], when: .init(updateTypes: ["ROLLBACK"])
        ),
        RouteDefinition(name: "all", topic: "rc-all"),
    ])
    #expect(table.pings(for: version42, project: "p").map(\.route) == ["default", "all"])
}

@Test func appliesPlatformSettings() throws {
    let message = try route(
        RouteDefinition(
            topic: "t", android: .init(priority: "HIGH", collapseKey: "k", ttlSeconds: 0), apns: .init(collapseId: "c"),
            webpush: .init(ttlSeconds: 60, urgency: "very-low"))
    ).message(for: version42, project: "p")
    #expect(message.android.priority == "high")
    #expect(message.android.ttl == "0s")
    #expect(message.apns.headers["apns-collapse-id"] == "c")
    #expect(message.webpush.headers == ["TTL": "60", "Urgency": "very-low"])
}

@Test func refusesBadTargets() {
    expectRefusal("topic", RouteDefinition(topic: "/topics/PUSH_RC"))
    expectRefusal("topic", RouteDefinition(topic: "has space"))
    expectRefusal("topic", RouteDefinition(topic: String(repeating: "a", count: 901)))
    expectRefusal("topic", RouteDefinition())
    expectRefusal("condition", RouteDefinition(topic: "a", condition: "'a' in topics"))
    expectRefusal("condition", RouteDefinition(condition: "'a' in topics &&"))
    expectRefusal("condition", RouteDefinition(condition: "('a' in topics"))
    expectRefusal("condition", RouteDefinition(condition: "'a' topics"))
    expectRefusal("condition", RouteDefinition(condition: "'a b' in topics"))
    expectRefusal(
        "condition", RouteDefinition(condition: "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics"))
}

@Test func acceptsFCMConditions() throws {
    for condition in [
        "'a' in topics", "'a' in topics && ('b' in topics || 'c' in topics)", "!('a' in topics) && \"b\" in topics",
        "'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics",
    ] {
        _ = try route(RouteDefinition(condition: condition))
    }
}

@Test func refusesBadData() throws {
    for key in ["from", "message_type", "notification", "google.sent_time", "gcm.n.e", "GOOGLE_X", ""] {
        expectRefusal("data.\(key)", RouteDefinition(topic: "t", data: [key: "x"]))
    }
    expectRefusal("data.K", RouteDefinition(topic: "t", data: ["K": "{{versionNumber}}"]))
    expectRefusal("data.K", RouteDefinition(topic: "t", data: ["K": "{{version"]))
    let numeric = try JSONDecoder().decode(RouteDefinition.self, from: Data(#"{"topic":"t","data":{"N":42}}"#.utf8))
    expectRefusal("data.N", numeric)
}

@Test func refusesDataThatCanOutgrowTheTopicLimit() throws {
    expectRefusal("data", RouteDefinition(topic: "t", data: ["K": String(repeating: "x", count: 2048)]))
    // Placeholders count at their full budget: 8 × {{description}} can reach 2048+ bytes.
    let many = Dictionary(uniqueKeysWithValues: (0..<8).map { ("D\($0)", "{{description}}") })
    expectRefusal("data", RouteDefinition(topic: "t", data: many))
    _ = try route(RouteDefinition(topic: "t", data: ["K": String(repeating: "x", count: 2047)]))
}

@Test func refusesBadPlatformSettings() {
    expectRefusal("android.priority", RouteDefinition(topic: "t", android: .init(priority: "urgent")))
    expectRefusal("android.ttlSeconds", RouteDefinition(topic: "t", android: .init(ttlSeconds: 2_419_201)))
    expectRefusal("android.ttlSeconds", RouteDefinition(topic: "t", android: .init(ttlSeconds: -1)))
    expectRefusal("apns.collapseId", RouteDefinition(topic: "t", apns: .init(collapseId: String(repeating: "c", count: 65))))
    expectRefusal("webpush.urgency", RouteDefinition(topic: "t", webpush: .init(urgency: "urgent")))
    expectRefusal("when.updateTypes", RouteDefinition(topic: "t", when: .init(updateTypes: ["ROLLBAK"])))
    expectRefusal("when.origins", RouteDefinition(topic: "t", when: .init(origins: ["console"])))
}

@Test func refusesDuplicateRouteNamesByIndex() {
    #expect(throws: RouteTableError.self) { try RouteTable([.default, .default]) }
    do throws(RouteTableError) {
        _ = try RouteTable([.default, RouteDefinition(name: "x", topic: "bad topic")])
    } catch {
        #expect(error.key == "routes[1].topic")
    }
}

@Test func aDeeplyNestedConditionIsRefusedNotAStackOverflow() throws {
    #expect(throws: ConditionError.tooDeep) { try TopicRules.conditionTopics(String(repeating: "(", count: 100_000) + "'a' in topics") }
    #expect(throws: ConditionError.tooDeep) { try TopicRules.conditionTopics(String(repeating: "!", count: 100_000) + "'a' in topics") }
    #expect(try TopicRules.conditionTopics("!!('a' in topics && ('b' in topics || !'c' in topics))") == ["a", "b", "c"])
}

@Test func refusesBadQuietPeriodsAndWaves() {
    let waves = RouteDefinition.WavesDefinition.init(shards:spreadSeconds:topic:)
    expectRefusal("debounceSeconds", RouteDefinition(topic: "PUSH_RC", debounceSeconds: -1))
    expectRefusal("debounceSeconds", RouteDefinition(topic: "PUSH_RC", debounceSeconds: 3601))
    expectRefusal("waves.shards", RouteDefinition(waves: waves(0, 60, "PUSH_RC_{shard}")))
    expectRefusal("waves.shards", RouteDefinition(waves: waves(nil, 60, "PUSH_RC_{shard}")))
    expectRefusal("waves.shards", RouteDefinition(waves: waves(1001, 60, "PUSH_RC_{shard}")))
    expectRefusal("waves.spreadSeconds", RouteDefinition(waves: waves(10, 0, "PUSH_RC_{shard}")))
    expectRefusal("waves.topic", RouteDefinition(waves: waves(10, 60, "PUSH_RC")))
    expectRefusal("waves.topic", RouteDefinition(waves: waves(10, 60, nil)))
    expectRefusal("waves.topic", RouteDefinition(waves: waves(10, 60, "PUSH_{shard}_{shard}")))
    expectRefusal("waves.topic", RouteDefinition(waves: waves(10, 60, "PUSH RC {shard}")))
    expectRefusal("waves.topic", RouteDefinition(waves: waves(10, 60, "/topics/PUSH_RC_{shard}")))
    expectRefusal("waves.topic", RouteDefinition(waves: waves(1000, 60, String(repeating: "a", count: 898) + "{shard}")))
    // A spread longer than the message TTL: the last shards' pings would arrive after the first ones expired.
    expectRefusal("waves.spreadSeconds", RouteDefinition(waves: waves(10, 86_401, "PUSH_RC_{shard}")))
    expectRefusal(
        "waves.spreadSeconds", RouteDefinition(android: .init(ttlSeconds: 600), waves: waves(10, 601, "PUSH_RC_{shard}")))
    expectRefusal(
        "waves.spreadSeconds", RouteDefinition(webpush: .init(ttlSeconds: 60), waves: waves(10, 61, "PUSH_RC_{shard}")))
    // A waved route sends to its shard topics only.
    expectRefusal("waves", RouteDefinition(topic: "PUSH_RC", waves: waves(10, 60, "PUSH_RC_{shard}")))
    expectRefusal("waves", RouteDefinition(condition: "'a' in topics", waves: waves(10, 60, "PUSH_RC_{shard}")))
    expectRefusal("name", RouteDefinition(name: "a@b", topic: "PUSH_RC"))
}

@Test func aWavedRoutePingsEachShardTopicAtItsTurn() throws {
    let waved = try route(
        RouteDefinition(
            name: "stale", data: ["V": "{{version}}"], android: .init(ttlSeconds: 600), debounceSeconds: 30,
            waves: .init(shards: 4, spreadSeconds: 600, topic: "PUSH_RC_{shard}")))
    let pings = try RouteTable([waved.definition]).pings(for: version42, project: "p")
    #expect(pings.map(\.route) == ["stale@0", "stale@1", "stale@2", "stale@3"])
    #expect(pings.map(\.message.target) == (0..<4).map { .topic("PUSH_RC_\($0)") })
    #expect(pings.map(\.schedule) == (0..<4).map { PingSchedule(quiet: .seconds(30), shard: .init(index: $0, count: 4, spacing: .seconds(150))) })
    #expect(pings.allSatisfy { $0.message.data == ["V": "42"] })
    #expect(Set(pings.map { Ping.routeName($0.route) }) == ["stale"])
    #expect(Ping.baseRoute("stale@3") == "stale@3", "each shard is due on its own")
    // Without waves or a quiet period a ping goes at once.
    #expect(try RouteTable([.default]).pings(for: version42, project: "p").map(\.schedule) == [.immediate])
}
