import Benchmark
import Foundation
import RelayCore

// One webhook's pure work, piece by piece, on the shapes Eventarc sends (a binary CloudEvent of a console publish).
let body = Data(
    #"{"versionNumber":"42","updateTime":"2026-11-21T09:14:03.512Z","updateUser":{"name":"Dana Ops","email":"dana@example.com"},"description":"Raise the daily reward for level 5 players","updateOrigin":"CONSOLE","updateType":"INCREMENTAL_UPDATE"}"#
        .utf8)
let headers = EventHeaders(
    contentType: "application/json", id: "8d6f3a2e-4b1c-4f0e-9a55-2f1b6c7d9e01",
    source: "//firebaseremoteconfig.googleapis.com/projects/demo-project", specVersion: "1.0",
    type: "google.firebase.remoteconfig.remoteConfig.v1.updated")
let secret = WebhookSecret.generate()
let verifier = StandardWebhookVerifier(secrets: [try! WebhookSecret(secret)])
let timestamp = Int64(Date().timeIntervalSince1970)
let signature = StandardWebhookVerifier.Headers(
    id: "msg_1", timestamp: String(timestamp),
    signature: StandardWebhookVerifier.sign(id: "msg_1", timestamp: timestamp, body: body, secret: try! WebhookSecret(secret)))
let routes = try! RouteTable([.default])
let event = try! EventDecoder.decode(body: body, headers: headers)
let pings = routes.pings(for: event.version, project: "demo-project")
let encoder = JSONEncoder()

/// Keeps a result alive so the optimiser cannot drop the work that made it (swift-benchmark 0.1.2 has none).
@inline(never) @_optimize(none)
func blackHole<T>(_ value: T) {}

benchmark("verify: Standard Webhooks HMAC") {
    try! verifier.verify(signature, body: body)
}
let oversized = StandardWebhookVerifier.Headers(
    id: "msg_1", timestamp: String(timestamp),
    signature: Array(repeating: "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", count: 1000).joined(separator: " "))
benchmark("refuse: a webhook-signature of 1,000 entries (scripts/bench --flood sends it)") {
    blackHole(try? verifier.verify(oversized, body: body))
}
benchmark("decode: binary CloudEvent") {
    blackHole(try! EventDecoder.decode(body: body, headers: headers))
}
benchmark("route: default route, one ping") {
    blackHole(routes.pings(for: event.version, project: "demo-project"))
}
benchmark("encode: FCM message JSON by hand (what the relay sends)") {
    blackHole(pings[0].message.json)
}
benchmark("encode: FCM message JSON with JSONEncoder (for comparison)") {
    blackHole(try! encoder.encode(pings[0].message))
}
benchmark("all four: verify + decode + route + encode") {
    try! verifier.verify(signature, body: body)
    let event = try! EventDecoder.decode(body: body, headers: headers)
    for ping in routes.pings(for: event.version, project: "demo-project") { blackHole(ping.message.json) }
}

// Change-aware routing: two templates at Remote Config's limits (2,000 parameters, 50 conditions), the second with a
// conditional value changed in 1 parameter of 20, compared and routed. Issue #17's target: at most 5 ms.
func largeTemplate(changed: Bool) -> Data {
    let conditions = (0..<50).map { ["name": "c\($0)", "expression": "device.language in ['l\($0)']"] }
    var parameters: [String: Any] = [:]
    for index in 0..<2000 {
        let condition = "c\(index % 50)"
        let value = changed && index % 20 == 0 ? "changed-\(index)" : "value-\(index)"
        parameters["parameter_\(index)"] = [
            "defaultValue": ["value": "default-\(index)"], "conditionalValues": [condition: ["value": value]], "valueType": "STRING",
        ]
    }
    return try! JSONSerialization.data(withJSONObject: ["conditions": conditions, "parameters": parameters])
}
let beforeJSON = largeTemplate(changed: false)
let afterJSON = largeTemplate(changed: true)
let beforeTemplate = try! RemoteConfigTemplate(json: beforeJSON)
let afterTemplate = try! RemoteConfigTemplate(json: afterJSON)
let audienceRoutes = try! RouteTable([
    RouteDefinition(name: "everyone", topic: "PUSH_RC", audience: Dictionary(uniqueKeysWithValues: (0..<50).map { ("c\($0)", "lang_\($0)") }))
])

benchmark("diff: 2,000 parameters, 50 conditions (parsed)") {
    blackHole(TemplateDiff(from: beforeTemplate, to: afterTemplate))
}
benchmark("diff and route: 2,000 parameters, 50 conditions, audience map") {
    let diff = TemplateDiff(from: beforeTemplate, to: afterTemplate)
    blackHole(audienceRoutes.pings(for: event.version, project: "demo-project", change: .known(diff)))
}
benchmark("parse: one 2,000-parameter template (once per version; cached)") {
    blackHole(try! RemoteConfigTemplate(json: afterJSON))
}

Benchmark.main()
