import AsyncHTTPClient
import FCMClient
import FCMEmulator
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import Testing

@testable import RelayServer

/// A token source for the live relay's key file, talking to its emulator.
private func tokenSource(_ relay: LiveRelay, refreshMargin: Duration = .seconds(240)) async throws -> CachingTokenSource {
    try await ServiceAccountTokenSource.make(
        key: try ServiceAccountKey(contentsOf: relay.keyFile), httpClient: .shared, refreshMargin: refreshMargin, logger: quietLogger)
}

// MARK: Tests

@Test func tokenIsFetchedOnceAndCachedAcrossWebhooks() async throws {
    try await withLiveRelay { relay in
        for version in 1...3 {
            let answer = try await relay.post("{\"versionNumber\":\(version)}")
            #expect(answer.status == 200)
        }
        #expect(await relay.emulator.stats.tokenRequests == 1)
        #expect(await relay.emulator.messages.count == 3)
    }
}

@Test func concurrentCallersShareOneTokenRequest() async throws {
    try await withLiveRelay { relay in
        let source = try await tokenSource(relay)
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await source.token().value } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(await relay.emulator.stats.tokenRequests == 1)
    }
}

@Test func tokenIsRefreshedBeforeItExpires() async throws {
    // Tokens live 200 s; with a 240 s margin every cached token is already due for refresh.
    try await withLiveRelay(.standard.tokenLifetime(200)) { relay in
        let source = try await tokenSource(relay)
        let first = try await source.token()
        let second = try await source.token()
        #expect(first != second)
        #expect(await relay.emulator.stats.tokenRequests == 2)
        // With a small margin the same token is reused.
        let relaxed = try await tokenSource(relay, refreshMargin: .seconds(10))
        let third = try await relaxed.token()
        #expect(try await relaxed.token() == third)
        #expect(await relay.emulator.stats.tokenRequests == 3)
    }
}

@Test func expiredTokenIsRefreshedOnceOn401WithoutADuplicatePing() async throws {
    try await withLiveRelay { relay in
        #expect(try await relay.post(#"{"versionNumber":1}"#).status == 200)
        await relay.emulator.expireAllTokens()
        let answer = try await relay.post(#"{"versionNumber":2}"#)
        #expect(answer.status == 200)
        #expect(await relay.emulator.stats.tokenRequests == 2)
        #expect(await relay.emulator.messages.count == 2)
        #expect(await relay.emulator.stats.sendRequests == 3)  // 1, then 2 refused with 401, then 2 again
    }
}

@Test func assertionIsAGoogleShapedJWTBearerGrant() async throws {
    try await withLiveRelay { relay in
        _ = try await tokenSource(relay).token()
        let assertion = try #require(await relay.emulator.assertions.first)
        let parts = assertion.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func decode(_ part: String) throws -> [String: Any] {
            var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while text.count % 4 != 0 { text += "=" }
            let data = try #require(Data(base64Encoded: text))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        let key = try ServiceAccountKey(contentsOf: relay.keyFile)
        let header = try decode(parts[0])
        let claims = try decode(parts[1])
        #expect(header["alg"] as? String == "RS256")
        #expect(header["kid"] as? String == key.privateKeyID)
        #expect(claims["iss"] as? String == key.clientEmail)
        #expect(claims["aud"] as? String == key.tokenURI)
        #expect(
            claims["scope"] as? String
                == "https://www.googleapis.com/auth/firebase.messaging https://www.googleapis.com/auth/firebase.remoteconfig")
        let iat = try #require(claims["iat"] as? Int)
        let exp = try #require(claims["exp"] as? Int)
        #expect(exp - iat == 3600)
    }
}

@Test func tokenEndpointRefusalIsReportedWithoutLeakingTheAssertion() async throws {
    try await withLiveRelay { relay in
        // A key the emulator has never seen: its signature cannot verify.
        let stranger = EmulatorState()
        let data = try await ServiceAccountFactory.make(project: "demo-project", tokenURI: relay.emulatorURL + "/token", state: stranger)
        let source = try await ServiceAccountTokenSource.make(key: try ServiceAccountKey(json: data), httpClient: .shared, logger: quietLogger)
        do throws(TokenError) {
            _ = try await source.token()
            Issue.record("expected a refusal")
        } catch {
            #expect(error == .refused(status: 400, error: "invalid_grant", description: "Invalid JWT Signature."))
            #expect(!"\(error)".contains("eyJ"))
        }
    }
}

@Test func aHugeExpiresInIsClampedAndNeverTraps() async throws {
    try await withLiveRelay(.standard.tokenLifetime(Int.max)) { relay in
        let first = try await relay.post(#"{"versionNumber":1}"#)
        let second = try await relay.post(#"{"versionNumber":2}"#)
        #expect(first.status == 200 && second.status == 200)
        #expect(await relay.emulator.stats.tokenRequests == 1)
    }
}

@Test func aTokenThatIsAlreadyExpiredIsRefusedNotUsed() async throws {
    try await withLiveRelay(.standard.tokenLifetime(-5)) { relay in
        let answer = try await relay.post(#"{"versionNumber":3}"#)
        #expect(answer.status == 503)
        #expect(try await relay.settledDelivery(version: 3).status == .dead)
        #expect(await relay.emulator.stats.sendRequests == 0)
    }
}

/// Records when it hands out a token, so a test sees what happened after.
private final class WatchedTokenSource: AccessTokenSource {
    let inner: any AccessTokenSource
    let events: NIOLockedValueBox<[String]>

    init(_ inner: any AccessTokenSource, events: NIOLockedValueBox<[String]>) { (self.inner, self.events) = (inner, events) }

    func token() async throws(TokenError) -> AccessToken {
        let token = try await inner.token()
        events.withLockedValue { $0.append("token") }
        return token
    }

    func invalidate(_ token: AccessToken) async { await inner.invalidate(token) }
}

/// Issue #50: the fence was asked before the token exchange (which can take `fcm.timeoutSeconds`) and not again before
/// the retry after a 401. The gate is asked once the token is in hand, right before each request leaves; a refusal
/// there sends nothing.
@Test func theGateIsAskedAfterTheTokenAndAgainBeforeTheRetryAfterA401() async throws {
    try await withLiveRelay { relay in
        let events = NIOLockedValueBox<[String]>([])
        let source = WatchedTokenSource(try await tokenSource(relay), events: events)
        let sender = FCMSender(httpClient: .shared, baseURL: relay.emulatorURL, tokenSource: source)
        let message = ByteBuffer(string: #"{"topic":"PUSH_RC","data":{"CONFIG_STATE":"STALE"}}"#)
        // A gate that lets the first request go and refuses the second.
        let gate: @Sendable () async -> String? = {
            events.withLockedValue { events in
                events.append("gate")
                return events.filter { $0 == "gate" }.count > 1 ? "the project's lease moved" : nil
            }
        }
        _ = try await sender.send(project: "demo-project", message: message, validateOnly: false, beforeRequest: { nil })
        await relay.emulator.expireAllTokens()
        await #expect {
            try await sender.send(project: "demo-project", message: message, validateOnly: false, beforeRequest: gate)
        } throws: { error in
            (error as? FCMError) == .withheld("the project's lease moved")
        }
        // The cached token (refused with 401), the gate, a new token, the gate again, which refused: nothing more left.
        #expect(events.withLockedValue { $0 } == ["token", "token", "gate", "token", "gate"])
        #expect(await relay.emulator.stats.sendRequests == 2)
        #expect(await relay.emulator.messages.count == 1)
    }
}
