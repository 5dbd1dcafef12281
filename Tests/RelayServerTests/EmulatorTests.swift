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
