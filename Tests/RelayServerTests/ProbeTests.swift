import AsyncHTTPClient
import Foundation
import RelayCore
import Testing

@testable import RelayServer

/// Health, readiness, metrics and the request id, over real HTTP.
@Suite struct ProbeTests {
    @Test func readinessNamesEveryCheckAndCountsACachedToken() async throws {
        try await withLiveRelay(.standard.environment(["RC_RELAY_READINESS_CACHE_SECONDS": "0"])) { relay in
            #expect(try await relay.admin(.GET, "/healthz", token: nil).decode(Contract.Health.self).status == .ok)
            let first = try await relay.admin(.GET, "/readyz", token: nil)
            #expect(first.status == 200)
            let checks = try first.decode(Components.Schemas.Readiness.self).checks
            #expect(checks.map(\.name) == ["configuration", "credentials", "draining", "queue", "undelivered"])
            #expect(!first.text.contains("demo-project"))
            // The admin view names each project's token check; the token fetched for the first probe is cached now.
            let info = try await relay.admin(.GET, "/admin/info")
            let token = try info.decode(Components.Schemas.Info.self).checks.first { $0.name == "token:demo-project" }
            #expect(token?.ok == true)
            #expect(token?.detail == "cached")
            #expect(await relay.emulator.stats.tokenRequests == 1)
        }
    }

    @Test func readinessFailsWhileNoTokenCanBeObtainedAndSaysWhyOnlyToTheAdmin() async throws {
        try await withLiveRelay(.standard.environment(["RC_RELAY_READINESS_CACHE_SECONDS": "0"])) { relay in
            await relay.emulator.inject(.init(status: 500, endpoint: "token", count: 2))
            let answer = try await relay.admin(.GET, "/readyz", token: nil)
            #expect(answer.status == 503)
            #expect(answer.problemType == "urn:rc-relay:problem:not-ready")
            #expect(answer.problem?.detail.contains("credentials") == true)
            // No project name and no upstream text for an unauthenticated caller.
            #expect(!answer.text.contains("demo-project"))
            // (The request id is random hex, so the details are checked, not the whole text.)
            let shown = [answer.problem?.detail ?? ""] + (answer.problem?.checks ?? []).map(\.detail)
            #expect(!shown.contains { $0.contains("500") })
            let credentials = answer.problem?.checks?.first { $0.name == "credentials" }
            #expect(credentials?.ok == false)
            let info = try await relay.admin(.GET, "/admin/info").decode(Components.Schemas.Info.self)
            let token = info.checks.first { $0.name == "token:demo-project" }
            #expect(token?.ok == false)
            #expect(token?.detail.contains("500") == true)
            #expect(try await relay.admin(.GET, "/readyz", token: nil).status == 200)
            let metrics = try await relay.admin(.GET, "/metrics", token: nil).text
            #expect(metrics.contains(#"rc_relay_token_refreshes_total{outcome="failure"} 2"#))
            #expect(metrics.contains(#"rc_relay_token_refreshes_total{outcome="success"} 1"#))
        }
    }

    @Test func aFloodOfProbesCostsOneTokenRequestEvenWhenItFails() async throws {
        try await withLiveRelay(.standard.environment(["RC_RELAY_READINESS_CACHE_SECONDS": "300"])) { relay in
            await relay.emulator.inject(.init(status: 503, endpoint: "token", count: 1000))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<50 {
                    group.addTask { try await relay.admin(.GET, index % 2 == 0 ? "/readyz" : "/metrics", token: nil).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 503 }.count == 25)
            #expect(statuses.filter { $0 == 200 }.count == 25)
            #expect(await relay.emulator.stats.tokenRequests == 1)
        }
    }

    @Test func readinessFailsWhileTheQueueIsFullAndRecoversWhenItDrains() async throws {
        // FCM holds both pings for 8 s: readiness is asked while they wait, however slow the machine is to get there.
        // The harness's FCM read timeout (60 s) is far beyond those 8 s: at the default 10 s, a soak run beside two busy
        // loops and another suite timed the request out, and the retry made the answer a 503.
        try await withLiveRelay(
            .standard.environment([
                "RC_RELAY_DELIVERY_MAX_QUEUED_PINGS": "2", "RC_RELAY_READINESS_CACHE_SECONDS": "0", "RC_RELAY_DELIVERY_ANSWER_WITHIN_SECONDS": "60",
            ])
        ) { relay in
            await relay.emulator.inject(.init(latencyMs: 8000, count: 2))
            // Version 1's request is at FCM before version 2 is sent: an older version's request never starts once a
            // newer one's has (issue #49), so sent at once, 2 could start first and 1 stand down, leaving one queued.
            async let first = relay.post(#"{"versionNumber": "1"}"#)
            try await eventually("version 1's request is at FCM") { await relay.emulator.stats.sendRequests >= 1 }
            async let second = relay.post(#"{"versionNumber": "2"}"#)
            var full: LiveRelay.Answer?
            try await eventually("readiness sees the queue full") {
                let answer = try await relay.admin(.GET, "/readyz", token: nil)
                if answer.status == 503 { full = answer }
                return full != nil
            }
            let saturated = try #require(full)
            #expect(saturated.problemType == "urn:rc-relay:problem:not-ready")
            let queue = saturated.problem?.checks?.first { $0.name == "queue" }
            #expect(queue?.ok == false)
            #expect(queue?.detail == "2 of 2 pings queued")
            #expect(try await relay.admin(.GET, "/metrics", token: nil).text.contains("rc_relay_queue_depth 2"))
            let answers = try await [first, second]
            #expect(answers.map(\.status) == [200, 200], "\(answers.map(\.text))")
            #expect(try await relay.admin(.GET, "/readyz", token: nil).status == 200)
            #expect(await relay.emulator.messages.count == 2)
        }
    }

    @Test func onStopReadinessTurnsFalseAndNewWebhooksAreTurnedAway() async throws {
        // The shutdown delay lasts until the test has seen what happens during it.
        let delay = ManualSleep()
        try await withLiveRelay(
            .standard.environment(["RC_RELAY_SHUTDOWN_DELAY_SECONDS": "3", "RC_RELAY_READINESS_CACHE_SECONDS": "0"]).sleep(delay.sleep)
        ) { relay in
            #expect(try await relay.admin(.GET, "/readyz", token: nil).status == 200)
            await relay.stop()
            try await eventually("the shutdown delay begins") { delay.asked == [.seconds(3)] }
            let ready = try await relay.admin(.GET, "/readyz", token: nil)
            #expect(ready.status == 503)
            let draining = ready.problem?.checks?.first { $0.name == "draining" }
            #expect(draining?.ok == false)
            let webhook = try await relay.post(#"{"versionNumber": "8"}"#)
            #expect(webhook.status == 503)
            #expect(webhook.problemType == "urn:rc-relay:problem:not-ready")
            #expect(webhook.headers["retry-after"] != nil)
            #expect(await relay.emulator.messages.isEmpty)
            #expect(try await relay.admin(.GET, "/metrics", token: nil).text.contains("rc_relay_ready 0"))
            #expect(!relay.hasStopped())
            delay.release()
            try await eventually("the relay stops once the delay is over") { relay.hasStopped() }
        }
    }

    @Test func metricsCountWebhooksPingsAndFCMAnswers() async throws {
        try await withLiveRelay { relay in
            #expect(try await relay.post(#"{"versionNumber": "1"}"#).status == 200)
            #expect(try await relay.post(#"{"versionNumber": "1"}"#).status == 200)  // a duplicate
            await relay.emulator.inject(.init(status: 400, errorCode: "INVALID_ARGUMENT"))
            #expect(try await relay.post(#"{"versionNumber": "2"}"#).delivered.status == .failed)
            #expect(try await relay.post(#"{"versionNumber": "3"}"#, signature: "v1,AAAA").status == 401)
            let answer = try await relay.admin(.GET, "/metrics", token: nil)
            #expect(answer.status == 200)
            #expect(answer.headers["content-type"]?.hasPrefix("text/plain") == true)
            let text = answer.text
            for line in [
                #"rc_relay_webhooks_received_total{source="template-version",outcome="delivered"} 1"#,
                #"rc_relay_webhooks_received_total{source="template-version",outcome="duplicate"} 1"#,
                #"rc_relay_webhooks_received_total{source="template-version",outcome="failed"} 1"#,
                #"rc_relay_webhooks_received_total{source="unknown",outcome="invalid-signature"} 1"#,
                #"rc_relay_pings_total{route="default",outcome="delivered"} 1"#,
                #"rc_relay_pings_total{route="default",outcome="failed"} 1"#,
                #"rc_relay_fcm_responses_total{status="200",error_code=""} 1"#,
                #"rc_relay_fcm_responses_total{status="400",error_code="INVALID_ARGUMENT"} 1"#,
                "rc_relay_fcm_attempts_total 2",
                "rc_relay_queue_depth 0",
                #"rc_relay_token_refreshes_total{outcome="success"} 1"#,
                "rc_relay_ready 1",  // current at the scrape, though nothing called /readyz
            ] {
                #expect(text.contains(line), "missing: \(line)")
            }
            #expect(text.contains("rc_relay_delivery_latency_seconds_bucket"))
            #expect(text.contains("rc_relay_fcm_request_duration_seconds_count 2"))
        }
    }

    @Test func theRequestIdIsHonouredOrMadeAndUnknownPathsAreProblems() async throws {
        try await withLiveRelay { relay in
            let honoured = try await relay.post(#"{"versionNumber": "1"}"#, headers: ["X-Request-Id": "req-abc-123"])
            #expect(honoured.headers["x-request-id"] == "req-abc-123")
            #expect(try honoured.delivered.requestId == "req-abc-123")
            let made = try await relay.post(#"{"versionNumber": "2"}"#, headers: ["X-Request-Id": String(repeating: "x", count: 300)])
            #expect(made.headers["x-request-id"]?.count == 32)
            let missing = try await relay.admin(.GET, "/nowhere", token: nil, base: relay.relayURL)
            #expect(missing.status == 404)
            #expect(missing.headers["content-type"] == "application/problem+json")
            #expect(missing.problem?.requestId == missing.headers["x-request-id"])
        }
    }
}

@Suite struct TrustedProxyTests {
    let proxies = TrustedProxies([TrustedProxies.Range("10.0.0.0/8")!, TrustedProxies.Range("::1")!])

    @Test func theHeaderCountsOnlyFromATrustedPeer() {
        #expect(proxies.client(peer: "203.0.113.9", forwardedFor: ["198.51.100.1"]) == "203.0.113.9")
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: ["198.51.100.1"]) == "198.51.100.1")
        #expect(proxies.client(peer: "::1", forwardedFor: ["2001:db8::5"]) == "2001:db8::5")
        #expect(proxies.client(peer: "10.1.2.3", forwardedFor: []) == "10.1.2.3")
    }

    @Test func theRightmostUntrustedHopIsTheClientSoForgeriesOnTheLeftDoNotCount() {
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["6.6.6.6, 198.51.100.7, 10.0.0.2"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["6.6.6.6", "198.51.100.7"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["10.0.0.3, 10.0.0.2"]) == "10.0.0.3")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["garbage, 198.51.100.7"]) == "198.51.100.7")
        #expect(proxies.client(peer: "10.0.0.1", forwardedFor: ["198.51.100.7, garbage"]) == "10.0.0.1")
    }

    @Test func rangesParseAndMatch() {
        #expect(TrustedProxies.Range("10.0.0.0/33") == nil)
        #expect(TrustedProxies.Range("not-an-ip") == nil)
        #expect(TrustedProxies.Range("fd00::/8") != nil)
        #expect(TrustedProxies([TrustedProxies.Range("192.168.1.0/24")!]).client(peer: "::ffff:192.168.1.20", forwardedFor: ["1.2.3.4"]) == "1.2.3.4")
        #expect(TrustedProxies([TrustedProxies.Range("192.168.1.0/24")!]).client(peer: "192.168.2.20", forwardedFor: ["1.2.3.4"]) == "192.168.2.20")
    }
}
