import AsyncHTTPClient
import FCMClient
import Foundation
import NIOCore
import Testing

@testable import FCMEmulator

/// Sends a raw `messages:send` body to the emulator with a valid token.
private func send(_ relay: LiveRelay, _ body: String, project: String = "demo-project", token: String? = nil) async throws -> LiveRelay.Answer {
    let bearer: String
    if let token {
        bearer = token
    } else {
        let source = try await ServiceAccountTokenSource.make(
            key: try ServiceAccountKey(contentsOf: relay.keyFile), httpClient: .shared, logger: quietLogger)
        bearer = try await source.token().value
    }
    var request = HTTPClientRequest(url: "\(relay.emulatorURL)/v1/projects/\(project)/messages:send")
    request.method = .POST
    request.headers.add(name: "Authorization", value: "Bearer \(bearer)")
    request.body = .bytes(ByteBuffer(string: body))
    return try await relay.send(request)
}

private let silentBlocks = #""apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1}}}"#

private let invalidMessages: [(String, String)] = [
    ("no target", #"{"message":{"data":{"a":"b"}}}"#),
    ("two targets", #"{"message":{"topic":"a","condition":"'b' in topics"}}"#),
    ("topic prefix", #"{"message":{"topic":"/topics/a"}}"#),
    (
        "six topics",
        #"{"message":{"condition":"'a' in topics || 'b' in topics || 'c' in topics || 'd' in topics || 'e' in topics || 'f' in topics"}}"#
    ),
    ("bad condition", #"{"message":{"condition":"'a' in topics &&"}}"#),
    ("number in data", #"{"message":{"topic":"a","data":{"n":1}}}"#),
    ("reserved key", #"{"message":{"topic":"a","data":{"google.x":"1"}}}"#),
    ("topic data over 2048", #"{"message":{"topic":"a","data":{"k":"\#(String(repeating: "x", count: 2048))"}}}"#),
    ("unknown field", #"{"message":{"topic":"a","priority":"high"}}"#),
    ("bad android ttl", #"{"message":{"topic":"a","android":{"ttl":"86400"}}}"#),
    (
        "background push at priority 10",
        #"{"message":{"topic":"a","apns":{"headers":{"apns-push-type":"background","apns-priority":"10"},"payload":{"aps":{"content-available":1}}}}}"#
    ),
    (
        "background push with an alert",
        #"{"message":{"topic":"a","apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},"payload":{"aps":{"content-available":1,"alert":"hi"}}}}}"#
    ),
    ("bad web urgency", #"{"message":{"topic":"a","webpush":{"headers":{"Urgency":"now"}}}}"#),
]

// MARK: Tests

@Test func emulatorJudgesMessagesAsFCMDoes() async throws {
    try await withLiveRelay { relay in
        for (name, body) in invalidMessages {
            let answer = try await send(relay, body)
            #expect(answer.status == 400, "\(name)")
            let error = answer.json["error"] as? [String: Any]
            #expect(error?["status"] as? String == "INVALID_ARGUMENT", "\(name)")
            let details = error?["details"] as? [[String: Any]]
            #expect(details?.first?["errorCode"] as? String == "INVALID_ARGUMENT", "\(name)")
        }
        let ok = try await send(relay, #"{"message":{"topic":"a","data":{"k":"\#(String(repeating: "x", count: 2047))"},\#(silentBlocks)}}"#)
        #expect(ok.status == 200)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func emulatorCountsPlaintextSendsAsHTTP1ConnectionByConnection() async throws {
    try await withLiveRelay { relay in
        let body = #"{"message":{"topic":"a","data":{"k":"v"},\#(silentBlocks)}}"#
        #expect(try await send(relay, body).status == 200)
        #expect(try await send(relay, body).status == 200)  // the same kept-alive connection
        // A second client is a second connection (the listening socket is not one connection for all).
        let other = HTTPClient(eventLoopGroupProvider: .singleton)
        let token = try await ServiceAccountTokenSource.make(
            key: try ServiceAccountKey(contentsOf: relay.keyFile), httpClient: .shared, logger: quietLogger
        ).token().value
        var request = HTTPClientRequest(url: "\(relay.emulatorURL)/v1/projects/demo-project/messages:send")
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.body = .bytes(ByteBuffer(string: body))
        let status = try await other.execute(request, timeout: .seconds(30)).status
        try await other.shutdown()
        #expect(status == .ok)
        let stats = await relay.emulator.stats
        #expect(stats.sendRequests == 3)
        #expect(stats.http2Sends == 0)
        #expect(stats.sendConnections == 2)
    }
}

@Test func emulatorRequiresATokenItIssuedForTheProject() async throws {
    try await withLiveRelay { relay in
        let forged = try await send(relay, #"{"message":{"topic":"a"}}"#, token: "ya29.forged")
        #expect(forged.status == 401)
        #expect((forged.json["error"] as? [String: Any])?["status"] as? String == "UNAUTHENTICATED")
        let otherProject = try await send(relay, #"{"message":{"topic":"a"}}"#, project: "someone-else")
        #expect(otherProject.status == 403)
        #expect(await relay.emulator.messages.isEmpty)
        // A role granted on another project (`--also-sends-for`) lets the account send for it, and for no third one.
        await relay.emulator.grant(projects: ["someone-else"])
        #expect(try await send(relay, #"{"message":{"topic":"a"}}"#, project: "someone-else").status == 200)
        #expect(try await send(relay, #"{"message":{"topic":"a"}}"#, project: "a-third-one").status == 403)
        #expect(await relay.emulator.messages.count == 1)
    }
}

@Test func emulatorRefusesTamperedAssertions() async throws {
    try await withLiveRelay { relay in
        _ = try await ServiceAccountTokenSource.make(key: try ServiceAccountKey(contentsOf: relay.keyFile), httpClient: .shared, logger: quietLogger)
            .token()
        let good = try #require(await relay.emulator.assertions.first)
        var parts = good.split(separator: ".").map(String.init)
        parts[1] = parts[1].dropLast(2) + (parts[1].hasSuffix("A") ? "BB" : "AA")
        var request = HTTPClientRequest(url: relay.emulatorURL + "/token")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(parts.joined(separator: "."))"))
        let answer = try await relay.send(request)
        #expect(answer.status == 400)
        #expect(answer.json["error"] as? String == "invalid_grant")
        #expect(await relay.emulator.stats.tokensIssued == 1)
    }
}

/// A long run does not grow the emulator without bound: it keeps the newest messages, and its stats count them all.
@Test func theEmulatorKeepsItsNewestMessagesAndCountsEveryOne() async {
    let state = EmulatorState(messagesKept: 3)
    var names: [String] = []
    for n in 1...5 {
        names.append(await state.record(project: "demo-project", request: #"{"message":{"topic":"t","data":{"n":"\#(n)"}}}"#, validateOnly: false))
    }
    #expect(await state.messages.map(\.name) == Array(names.suffix(3)))
    #expect(await state.messages.map(\.message) == (3...5).map { #"{"data":{"n":"\#($0)"},"topic":"t"}"# })
    #expect(await state.stats.accepted == 5)
    await state.reset()
    #expect(await state.messages.isEmpty)
}

// MARK: Google's discovery documents as the judge

/// The repository's root, for the fixtures the embedded documents come from.
private let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

@Test func theEmbeddedDiscoveryDocumentsAreTheFixtures() throws {
    for (embedded, file) in [(GoogleDocuments.fcmV1, "fcm.v1.json"), (GoogleDocuments.remoteConfigV1, "firebaseremoteconfig.v1.json")] {
        let fixture = try String(contentsOf: repositoryRoot.appendingPathComponent("Tests/Fixtures/google/\(file)"), encoding: .utf8)
        #expect(embedded == fixture.trimmingCharacters(in: .newlines), "run scripts/embed-discovery after changing \(file)")
    }
    #expect(DiscoveryDocument.fcm.revision == "20261023")
    #expect(DiscoveryDocument.remoteConfig.revision == "20240611")
}

@Test(arguments: [
    ("collapseKey", "collapse_key"), ("androidV2", "android_v2"), ("fcmOptions", "fcm_options"), ("ttl", "ttl"),
    ("restrictedSatelliteOk", "restricted_satellite_ok"),
])
func protoNamesAreTheJSONNamesInSnakeCase(json: String, proto: String) {
    #expect(DiscoveryDocument.protoName(json) == proto)
}

@Test func fieldsGoogleAddedAreAcceptedUnderEitherName() async throws {
    let token = "c" + String(repeating: "A", count: 21) + ":APA91b" + String(repeating: "x", count: 120)
    try await withLiveRelay { relay in
        for body in [
            #"{"message":{"fid":"cAAAAAAAAAAAAAAAAAAAAA","data":{"k":"v"}}}"#,
            #"{"message":{"topic":"a","androidV2":{}}}"#,
            #"{"message":{"topic":"a","android":{"bandwidthConstrainedOk":true,"restrictedSatelliteOk":true,"collapse_key":"rc","priority":"normal","ttl":"3.500000000s"}}}"#,
            #"{"message":{"topic":"a","fcm_options":{"analytics_label":"x"}},"validate_only":true}"#,
            #"{"message":{"token":"\#(token)"}}"#,
            #"{"message":{"token":"APA91b\#(String(repeating: "y", count: 140))"}}"#,
            #"{"message":{"topic":"a","data":{"k":"v","k":"w"}}}"#,
            // null is a field's default: absent.
            #"{"message":{"token":"\#(token)","topic":null}}"#,
            #"{"message":{"topic":"a","android":null,"androidV2":{}}}"#,
            // Enums by number, also written as a string, any int32 (proto3's enums are open).
            #"{"message":{"topic":"a","android":{"priority":"1"}}}"#,
            #"{"message":{"topic":"a","android":{"priority":7}}}"#,
            #"{"message":{"topic":"a","android":{"notification":{"notification_count":1.0}}}}"#,
        ] {
            let answer = try await send(relay, body)
            #expect(answer.status == 200, "\(body): \(answer.json)")
        }
    }
}

@Test func aFieldTheDocumentLacksIsNamedInABadRequestDetail() async throws {
    try await withLiveRelay { relay in
        for (body, field, message) in [
            (
                #"{"message":{"topic":"a","android":{"notification":{"notAField":1}}}}"#, "message.android.notification.notAField",
                #"Invalid JSON payload received. Unknown name "notAField" at 'message.android.notification': Cannot find field."#
            ),
            (#"{"message":{"topic":"a"},"dryRun":true}"#, "dryRun", #"Invalid JSON payload received. Unknown name "dryRun": Cannot find field."#),
            (#"{"message":{"topic":"a","data":{"v":12}}}"#, "message.data[0].value", "Invalid value at 'message.data[0].value' (TYPE_STRING), 12"),
            (
                #"{"message":{"topic":"a","data":{"a":"x","b":true}}}"#, "message.data[1].value",
                "Invalid value at 'message.data[1].value' (TYPE_STRING), true"
            ),
            (
                #"{"message":{"topic":"a","android":{"ttl":"86400"}}}"#, "message.android.ttl",
                #"Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), "86400""#
            ),
            (
                #"{"message":{"topic":"a","android":{"priority":"URGENT"}}}"#, "message.android.priority",
                #"Invalid value at 'message.android.priority' (TYPE_ENUM), "URGENT""#
            ),
        ] {
            let answer = try await send(relay, body)
            #expect(answer.status == 400, "\(body)")
            let error = answer.json["error"] as? [String: Any]
            #expect(error?["message"] as? String == message)
            let details = error?["details"] as? [[String: Any]] ?? []
            #expect(
                details.contains {
                    $0["@type"] as? String == "type.googleapis.com/google.firebase.fcm.v1.FcmError"
                        && $0["errorCode"] as? String == "INVALID_ARGUMENT"
                })
            let violations =
                details.first { $0["@type"] as? String == "type.googleapis.com/google.rpc.BadRequest" }?["fieldViolations"] as? [[String: Any]]
            #expect(violations?.first?["field"] as? String == field, "\(body)")
            #expect(violations?.first?["description"] as? String == message)
        }
    }
}

@Test func tokensAreJudgedByShapeAndUnregisteredOnesAreNotFound() async throws {
    let stale = "d" + String(repeating: "B", count: 21) + ":APA91b" + String(repeating: "z", count: 120)
    try await withLiveRelay { relay in
        for token in ["", "not-a-token", "APA91b", "cAAAAAAAAAAAAAAAAAAAA", "aAAAAAAAAAAAAAAAAAAAAA"] {
            let answer = try await send(relay, #"{"message":{"token":"\#(token)"},"validate_only":true}"#)
            #expect(answer.status == 400, "\(token)")
            #expect((answer.json["error"] as? [String: Any])?["message"] as? String == MessageRules.invalidToken)
        }
        await relay.emulator.unregister([stale])
        for validateOnly in [true, false] {
            let answer = try await send(relay, #"{"message":{"token":"\#(stale)"},"validate_only":\#(validateOnly)}"#)
            #expect(answer.status == 404)
            let error = answer.json["error"] as? [String: Any]
            #expect(error?["status"] as? String == "NOT_FOUND")
            #expect((error?["details"] as? [[String: Any]])?.first?["errorCode"] as? String == "UNREGISTERED")
        }
        for body in [
            #"{"message":{"topic":"a","android":{},"androidV2":{}}}"#,
            #"{"message":{"topic":"a","androidV2":{"ttl":"2419201s"}}}"#,
            #"{"message":{"topic":"a","android":{"data":{"from":"x"}}}}"#,
            #"{"message":{"topic":"a","android":{"priority":"2147483648"}}}"#,
        ] {
            #expect(try await send(relay, body).status == 400, "\(body)")
        }
        #expect(await relay.emulator.messages.isEmpty)
    }
}

@Test func theJSONParserKeepsOrderAndRefusesWhatIsNotJSON() throws {
    let value = try JSONParser.parse(Array(#" {"b": [1, -2.5e3, true, null], "a": "\u00e9\ud83d\ude00\n"} "#.utf8))
    #expect(value == .object([("b", .array([.number("1"), .number("-2.5e3"), .bool(true), .null])), ("a", .string("é😀\n"))]))
    for bad in [
        "", "{", #"{"a":}"#, "[1,]", "01", "1.", #""\x""#, "{\"a\":1} x", String(repeating: "[", count: 100) + String(repeating: "]", count: 100),
        "\"\u{1}\"",
    ] {
        #expect(throws: JSONParser.Failure.self, "\(bad)") { try JSONParser.parse(Array(bad.utf8)) }
    }
}
