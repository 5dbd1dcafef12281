import Foundation
import RelayCore

/// A Remote Config template as Remote Config (or whatever answers in its place) returns it: reading any bytes must
/// give a template or a `TemplateError`, and comparing it with a fixed template and routing the difference through
/// an audience map and a change rule must finish, never trap.
private let reference = try! RemoteConfigTemplate(
    json: Data(
        #"{"conditions": [{"name": "ios_ja", "expression": "device.language in ['ja']"}, {"name": "beta", "expression": "percent <= 5"}], "parameters": {"welcome": {"defaultValue": {"value": "Hi"}, "conditionalValues": {"ios_ja": {"value": "やあ"}}}}, "parameterGroups": {"g": {"parameters": {"checkout_color": {"defaultValue": {"value": "red"}}}}}}"#
            .utf8))
private let routes = try! RouteTable([
    RouteDefinition(name: "everyone", topic: "PUSH_RC", audience: ["ios_ja": "lang_ja", "beta": "beta"]),
    RouteDefinition(name: "checkout", topic: "CHECKOUT", when: .init(changed: .init(parameters: ["checkout_*", "w?lcome"], conditions: ["beta"]))),
])

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(UnsafeRawBufferPointer(start: start, count: count))
    guard let template = try? RemoteConfigTemplate(json: data) else { return 0 }
    for diff in [TemplateDiff(from: reference, to: template), TemplateDiff(from: template, to: reference)] {
        let pings = routes.pings(for: TemplateVersion(versionNumber: 2), project: "p", change: .known(diff))
        for ping in pings {
            if case .condition(let condition) = ping.message.target {
                precondition((try? TopicRules.conditionTopics(condition).count) ?? 99 <= 5, "a narrowed ping names more than 5 topics")
            }
        }
    }
    return 0
}
