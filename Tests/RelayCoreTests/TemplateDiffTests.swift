import Foundation
import Testing

@testable import RelayCore

/// The welcome template (Tests/Fixtures/templates), changed by `edit` on its JSON object.
private func template(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> RemoteConfigTemplate {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    var object = try #require(
        try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent("Fixtures/templates/welcome.json"))) as? [String: Any])
    edit(&object)
    return try RemoteConfigTemplate(json: try JSONSerialization.data(withJSONObject: object))
}

private func setParameter(_ object: inout [String: Any], _ name: String, _ value: [String: Any]?) {
    var parameters = object["parameters"] as? [String: Any] ?? [:]
    parameters[name] = value
    object["parameters"] = parameters
}

private func conditional(_ object: inout [String: Any], _ name: String, _ condition: String, _ value: String?) {
    var parameters = object["parameters"] as! [String: Any]
    var parameter = parameters[name] as! [String: Any]
    var values = parameter["conditionalValues"] as? [String: Any] ?? [:]
    values[condition] = value.map { ["value": $0] }
    parameter["conditionalValues"] = values
    parameters[name] = parameter
    object["parameters"] = parameters
}

private func route(_ yaml: RouteDefinition) throws -> Route { try Route(yaml, index: 0) }

private let languages = ["ios_ja": "lang_ja", "early_adopters": "early"]

// MARK: Tests

@Test func aTemplateIsReadWithItsGroupsAndValueKinds() throws {
    let read = try template()
    #expect(read.conditions.map(\.name) == ["ios_ja", "early_adopters"])
    #expect(Set(read.parameters.keys) == ["welcome_message", "new_store", "tutorial_steps", "skip_allowed"])
    #expect(read.parameters["skip_allowed"]?.defaultValue == .useInAppDefault)
    #expect(read.parameters["tutorial_steps"]?.group == "onboarding")
    #expect(read.parameters["welcome_message"]?.conditionalValues["ios_ja"] == .value("ようこそ"))
}

@Test func noChangeIsAnEmptyDiffAndMovingBetweenGroupsIsNoChange() throws {
    #expect(TemplateDiff(from: try template(), to: try template()).isEmpty)
    let moved = try template { object in
        var groups = object["parameterGroups"] as! [String: Any]
        var onboarding = groups["onboarding"] as! [String: Any]
        var parameters = onboarding["parameters"] as! [String: Any]
        let steps = parameters.removeValue(forKey: "tutorial_steps")
        onboarding["parameters"] = parameters
        groups["onboarding"] = onboarding
        object["parameterGroups"] = groups
        setParameter(&object, "tutorial_steps", steps as? [String: Any])
    }
    #expect(TemplateDiff(from: try template(), to: moved).isEmpty)
}

@Test func everyKindOfChangeIsSeen() throws {
    let before = try template()
    let after = try template { object in
        setParameter(&object, "added_flag", ["defaultValue": ["value": "1"]])
        setParameter(&object, "new_store", nil)
        conditional(&object, "welcome_message", "early_adopters", "Hi early")
        var conditions = object["conditions"] as! [[String: Any]]
        conditions[1]["expression"] = "percent <= 30"
        conditions.append(["name": "android_only", "expression": "device.os == 'android'"])
        object["conditions"] = conditions
    }
    let diff = TemplateDiff(from: before, to: after)
    #expect(diff.parameters.map(\.name) == ["added_flag", "new_store", "welcome_message"])
    #expect(diff.parameters.map(\.kind) == [.added, .removed, .changed])
    #expect(diff.parameters[2].conditions == ["early_adopters"] && !diff.parameters[2].defaultChanged)
    #expect(diff.conditions.map(\.name) == ["android_only", "early_adopters"])
    #expect(diff.conditions.map(\.kind) == [.added, .changed])
    #expect(!diff.conditionsReordered)
    #expect(diff.confinedToConditions == nil)
}

@Test func reorderingConditionsIsAChangeForEveryone() throws {
    let reordered = try template { object in object["conditions"] = Array((object["conditions"] as! [Any]).reversed()) }
    let diff = TemplateDiff(from: try template(), to: reordered)
    #expect(diff.conditionsReordered && !diff.isEmpty)
    let decision = try route(RouteDefinition(name: "r", topic: "PUSH_RC", audience: languages)).decide(diff)
    #expect(decision.fires && decision.targets == [.topic("PUSH_RC")])
    #expect(decision.reason.contains("re-ordered"))
}

@Test func aChangeConfinedToMappedConditionsPingsOnlyTheirTopics() throws {
    let japanese = try template { conditional(&$0, "welcome_message", "ios_ja", "いらっしゃいませ") }
    let diff = TemplateDiff(from: try template(), to: japanese)
    #expect(diff.confinedToConditions == ["ios_ja"])
    let decision = try route(RouteDefinition(name: "r", topic: "PUSH_RC", audience: languages)).decide(diff)
    #expect(decision.targets == [.topic("lang_ja")])
    // A default that changes reaches everyone; so does a condition with no topic of its own.
    let everyone = try template { setParameter(&$0, "welcome_message", ["defaultValue": ["value": "Hello"]]) }
    #expect(
        try route(RouteDefinition(name: "r", topic: "PUSH_RC", audience: languages)).decide(TemplateDiff(from: try template(), to: everyone)).targets
            == [.topic("PUSH_RC")])
    let unmapped = try route(RouteDefinition(name: "r", topic: "PUSH_RC", audience: ["early_adopters": "early"])).decide(diff)
    #expect(unmapped.targets == [.topic("PUSH_RC")] && unmapped.reason.contains("ios_ja has no audience topic"))
}

@Test func manyNarrowedTopicsAreSplitByFCMsFiveTopicLimit() throws {
    var audience: [String: String] = [:]
    var conditions: [[String: Any]] = []
    for index in 0..<12 {
        audience["c\(index)"] = "t\(String(format: "%02d", index))"
        conditions.append(["name": "c\(index)", "expression": "percent <= \(index)"])
    }
    let before = try template { $0["conditions"] = conditions }
    let after = try template { object in
        object["conditions"] = conditions
        for index in 0..<12 { conditional(&object, "welcome_message", "c\(index)", "v\(index)") }
    }
    let decision = try route(RouteDefinition(name: "r", topic: "PUSH_RC", audience: audience)).decide(TemplateDiff(from: before, to: after))
    #expect(decision.targets.count == 3)
    for target in decision.targets {
        if case .condition(let condition) = target { #expect(try TopicRules.conditionTopics(condition).count <= 5) }
    }
    let named = decision.targets.flatMap { target -> [String] in
        switch target {
        case .topic(let topic): [topic]
        case .condition(let condition): (try? TopicRules.conditionTopics(condition)) ?? []
        case .token: []
        }
    }
    #expect(Set(named) == Set(audience.values))
}

@Test func aChangeRuleFiresOnlyForWhatItNames() throws {
    let checkout = try route(
        RouteDefinition(name: "checkout", topic: "PUSH_RC", when: .init(changed: .init(parameters: ["check?ut_*", "tutorial_steps"]))))
    let grouped = try template { object in
        var groups = object["parameterGroups"] as! [String: Any]
        var onboarding = groups["onboarding"] as! [String: Any]
        var parameters = onboarding["parameters"] as! [String: Any]
        parameters["tutorial_steps"] = ["defaultValue": ["value": "{\"count\": 4}"], "valueType": "JSON"]
        onboarding["parameters"] = parameters
        groups["onboarding"] = onboarding
        object["parameterGroups"] = groups
    }
    #expect(checkout.decide(TemplateDiff(from: try template(), to: grouped)).fires)
    let other = try template { conditional(&$0, "welcome_message", "ios_ja", "やあ") }
    #expect(!checkout.decide(TemplateDiff(from: try template(), to: other)).fires)
    let byCondition = try route(RouteDefinition(name: "ja", topic: "lang_ja", when: .init(changed: .init(conditions: ["ios_ja"]))))
    #expect(byCondition.decide(TemplateDiff(from: try template(), to: other)).fires)
    let added = try template { setParameter(&$0, "checkout_v2", ["defaultValue": ["value": "on"]]) }
    #expect(checkout.decide(TemplateDiff(from: try template(), to: added)).fires)
    // Unknown change: everyone, with the reason.
    let unknown = checkout.decide(nil, unavailable: "Remote Config answered 403")
    #expect(unknown.fires && unknown.targets == [.topic("PUSH_RC")] && unknown.reason.contains("403"))
}

@Test func globsMatchAsShellsDo() {
    #expect(Glob.matches("checkout_*", "checkout_button"))
    #expect(Glob.matches("*", ""))
    #expect(Glob.matches("a*b*c", "aXXbYYc"))
    #expect(!Glob.matches("a*b*c", "aXXbYY"))
    #expect(Glob.matches("a?c", "abc") && !Glob.matches("a?c", "ac"))
    #expect(Glob.matches("literal*", "literal*star"))
    #expect(!Glob.matches("checkout", "checkout_button"))
}

@Test func malformedTemplatesAreRefusedWithAReason() {
    for (text, reason) in [
        ("[]", "not a JSON object"), (#"{"conditions": {"a": 1}}"#, "conditions"), (#"{"parameters": {"a": 1}}"#, "parameter 'a'"),
        (#"{"parameters": {"a": {"defaultValue": "x"}}}"#, "value of parameter"),
        (#"{"parameters": {"a": {}}, "parameterGroups": {"g": {"parameters": {"a": {}}}}}"#, "appears twice"),
        (#"{"conditions": [{"expression": "true"}]}"#, "no name"),
    ] {
        #expect(throws: TemplateError.self, "\(reason)") { try RemoteConfigTemplate(json: Data(text.utf8)) }
        do {
            _ = try RemoteConfigTemplate(json: Data(text.utf8))
        } catch {
            #expect(error.description.contains(reason), "\(error)")
        }
    }
    // An unknown value kind is kept, so a change to it is still a change.
    let personalised = #"{"parameters": {"a": {"defaultValue": {"personalizationValue": {"personalizationId": "p1"}}}}}"#
    let other = #"{"parameters": {"a": {"defaultValue": {"personalizationValue": {"personalizationId": "p2"}}}}}"#
    let diff = TemplateDiff(from: try! RemoteConfigTemplate(json: Data(personalised.utf8)), to: try! RemoteConfigTemplate(json: Data(other.utf8)))
    #expect(diff.parameters.first?.defaultChanged == true)
}

@Test func changedParametersAreWholeOrAStar() throws {
    let value = try DataTemplate("{{changedParameters}}")
    let version = TemplateVersion(versionNumber: 2)
    #expect(value.render(version, project: "p", changedParameters: ["a", "b_2"]) == "a,b_2")
    #expect(value.render(version, project: "p", changedParameters: []) == "")
    #expect(value.render(version, project: "p") == "*")  // unknown
    #expect(value.render(version, project: "p", changedParameters: ["a,b"]) == "*")  // not a name Remote Config allows
    // 52 names of 10 bytes and their commas pass 512 bytes: never a list cut short.
    let many = (0..<52).map { String(format: "param_%04d", $0) }
    #expect(value.render(version, project: "p", changedParameters: many) == "*")
    #expect(value.render(version, project: "p", changedParameters: Array(many.prefix(46))).split(separator: ",").count == 46)
    #expect(value.maximumByteCount == 512)
    // Only a change seen whole lists names: a condition change may move any parameter.
    let japanese = try template { conditional(&$0, "welcome_message", "ios_ja", "いらっしゃいませ") }
    #expect(TemplateChange.known(TemplateDiff(from: try template(), to: japanese)).changedParameters == ["welcome_message"])
    let reordered = try template { object in object["conditions"] = Array((object["conditions"] as! [Any]).reversed()) }
    #expect(TemplateChange.known(TemplateDiff(from: try template(), to: reordered)).changedParameters == nil)
    #expect(TemplateChange.unknown("down").changedParameters == nil)
}

/// Issue #49: a rollback measured from the last version relayed alone (its delivery of N−1 not settled yet) missed
/// the devices told of N−1. Measured from both and merged, it reaches what it changed from either.
@Test func aChangeMeasuredFromTwoVersionsIsWhatItChangedFromEither() throws {
    let relayed = try template()
    let previous = try template { object in
        conditional(&object, "welcome_message", "ios_ja", "おはよう")
        conditional(&object, "welcome_message", "early_adopters", "hi early")
    }
    let rollback = try template { object in conditional(&object, "welcome_message", "early_adopters", "back again") }
    let fromRelayed = TemplateDiff(from: relayed, to: rollback)
    #expect(fromRelayed.confinedToConditions == ["early_adopters"], "from the last version relayed alone: Japanese devices are missed")
    let merged = fromRelayed.merged(with: TemplateDiff(from: previous, to: rollback))
    #expect(merged.confinedToConditions == ["early_adopters", "ios_ja"])
    #expect(merged.changedParameterNames == ["welcome_message"])
    // A parameter added in one and changed in the other is added: its values reach anyone.
    let added = try template { object in setParameter(&object, "banner", ["defaultValue": ["value": "x"]]) }
    let changedBanner = try template { object in setParameter(&object, "banner", ["defaultValue": ["value": "y"]]) }
    let both = TemplateDiff(from: changedBanner, to: added).merged(with: TemplateDiff(from: relayed, to: added))
    #expect(both.parameters.first { $0.name == "banner" }?.kind == .added)
    #expect(both.confinedToConditions == nil)
    #expect(TemplateDiff(from: relayed, to: relayed).merged(with: TemplateDiff(from: relayed, to: relayed)).isEmpty)
}
