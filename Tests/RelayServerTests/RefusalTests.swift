import AsyncHTTPClient
import Foundation
import NIOCore
import Testing

@testable import RelayServer

/// One request the relay must refuse, and how.
struct RefusalCase: CustomTestStringConvertible, Sendable {
    var name: String
    var status: Int
    var problem: String
    var send: @Sendable (LiveRelay) async throws -> LiveRelay.Answer
    var testDescription: String { name }
}

private let body = #"{"versionNumber":"42","updateType":"INCREMENTAL_UPDATE"}"#
/// Now, in Unix seconds, read when the request is made (a stored global would be stale by then).
private var now: Int64 { Int64(Date().timeIntervalSince1970) }

private let cases: [RefusalCase] = [
    .init(name: "no signature", status: 401, problem: "invalid-signature") { try await $0.post(body, headers: ["webhook-signature": ""]) },
    .init(name: "bad signature", status: 401, problem: "invalid-signature") {
        try await $0.post(body, signature: "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    },
    .init(name: "signed by another secret", status: 401, problem: "invalid-signature") { relay in
        var other = relay
        other = LiveRelay(
            relayURL: relay.relayURL, emulatorURL: relay.emulatorURL, webhookURL: relay.webhookURL, emulator: relay.emulator,
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", keyFile: relay.keyFile, gameBKeyFile: relay.gameBKeyFile)
        return try await other.post(body)
    },
    .init(name: "stale timestamp", status: 401, problem: "timestamp-out-of-tolerance") { try await $0.post(body, timestamp: now - 400) },
    .init(name: "future timestamp", status: 401, problem: "timestamp-out-of-tolerance") { try await $0.post(body, timestamp: now + 400) },
    .init(name: "body over the limit", status: 413, problem: "body-too-large") {
        try await $0.post(#"{"versionNumber":1,"description":""# + String(repeating: "x", count: 70_000) + #""}"#)
    },
    .init(name: "wrong content type", status: 415, problem: "unsupported-media-type") { try await $0.post(body, contentType: "text/plain") },
    .init(name: "malformed JSON", status: 400, problem: "malformed-event") { try await $0.post(#"{"versionNumber":"#) },
    .init(name: "missing versionNumber", status: 400, problem: "malformed-event") { try await $0.post(#"{"updateType":"ROLLBACK"}"#) },
    .init(name: "unknown event type", status: 422, problem: "unknown-event-type") {
        try await $0.post(body, headers: binaryHeaders(type: "google.cloud.storage.object.v1.finalized"))
    },
    .init(name: "another project", status: 422, problem: "unknown-project") {
        try await $0.post(body, headers: binaryHeaders(source: "//firebaseremoteconfig.googleapis.com/projects/other-project"))
    },
]

// MARK: Tests

@Test(arguments: cases)
func refusesAndSendsNothing(_ refusal: RefusalCase) async throws {
    try await withLiveRelay { relay in
        let answer = try await refusal.send(relay)
        #expect(answer.status == refusal.status)
        #expect(answer.headers["content-type"] == "application/problem+json")
        #expect(answer.problemType == "urn:rc-relay:problem:\(refusal.problem)")
        #expect(answer.problem?.status == refusal.status)
        #expect(answer.problem?.detail.isEmpty == false)
        #expect(await relay.emulator.stats.sendRequests == 0)
        #expect(await relay.emulator.stats.tokenRequests == 0)
        let detail = answer.problem?.detail ?? ""
        #expect(!detail.contains(relay.secret.dropFirst(6).prefix(12)))
    }
}

@Test func refusesAStreamedBodyOverTheLimitWhileReading() async throws {
    try await withLiveRelay { relay in
        var request = HTTPClientRequest(url: relay.webhookURL)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        // Signature headers that pass on their own (the MAC is checked once the body is read): the body is read.
        request.headers.add(name: "webhook-id", value: "msg_streamed")
        request.headers.add(name: "webhook-timestamp", value: "\(Int(Date().timeIntervalSince1970))")
        request.headers.add(name: "webhook-signature", value: "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
        let chunk = ByteBuffer(string: String(repeating: " ", count: 8192))
        // No Content-Length: the limit must hold while the body streams in.
        request.body = .stream(
            AsyncStream { continuation in
                for _ in 0..<64 { continuation.yield(chunk) }
                continuation.finish()
            }, length: .unknown)
        let answer = try await relay.send(request)
        #expect(answer.status == 413)
        #expect(answer.problemType == "urn:rc-relay:problem:body-too-large")
    }
}

@Test func aReplayedRequestOutsideTheWindowIsRefused() async throws {
    try await withLiveRelay { relay in
        let old = now - 600
        let first = try await relay.post(body, id: "msg_replay", timestamp: old)
        #expect(first.status == 401)
        #expect(await relay.emulator.stats.sendRequests == 0)
    }
}

@Test func aKnownPathAskedWithAnotherMethodIs405WithAllow() async throws {
    try await withLiveRelay { relay in
        for (method, path, allow) in [
            ("TRACE", "/healthz", "GET"), ("DELETE", "/webhooks/remote-config", "POST"), ("PUT", "/admin/deliveries/abc/retry", "POST"),
        ] {
            let answer = try await relay.admin(.RAW(value: method), path)
            #expect(answer.status == 405, "\(method) \(path)")
            #expect(answer.headers["allow"] == allow)
            #expect(answer.problemType == "urn:rc-relay:problem:method-not-allowed")
        }
        let unknown = try await relay.admin(.TRACE, "/nowhere")
        #expect(unknown.status == 404)
    }
}

@Test func aPubSubPushWithoutATokenIs401EvenWhenPubSubIsNotConfigured() async throws {
    try await withLiveRelay { relay in
        let missing = try await relay.post(#"{"message": {"data": "e30=", "messageId": "1"}}"#, url: relay.relayURL + "/pubsub/remote-config")
        #expect(missing.status == 401)
        #expect(missing.problemType == "urn:rc-relay:problem:invalid-id-token")
        let withToken = try await relay.post(
            #"{"message": {"data": "e30=", "messageId": "1"}}"#, headers: ["Authorization": "Bearer x.y.z"],
            url: relay.relayURL + "/pubsub/remote-config")
        #expect(withToken.status == 404)
    }
}

@Test func idsLongerThan256CharactersAreA400AndSendNothing() async throws {
    try await withLiveRelay { relay in
        let long = String(repeating: "i", count: 257)
        let viaWebhookID = try await relay.post(#"{"versionNumber":"5"}"#, id: long)
        #expect(viaWebhookID.status == 400)
        #expect(viaWebhookID.problemType == "urn:rc-relay:problem:malformed-event")
        let viaCEID = try await relay.post(#"{"versionNumber":"5"}"#, headers: binaryHeaders(id: long))
        #expect(viaCEID.status == 400)
        #expect(viaCEID.problem?.detail.contains("256") == true)
        let atTheLimit = try await relay.post(#"{"versionNumber":"5"}"#, headers: binaryHeaders(id: String(repeating: "i", count: 256)))
        #expect(atTheLimit.status == 200)
        #expect(await relay.emulator.messages.count == 1)
    }
}
