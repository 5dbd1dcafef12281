import FCMClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

/// A raw TCP connection to the relay, for clients that do not behave; `collector` keeps what the relay writes back.
private func connect(_ url: String, collector: Collector? = nil) async throws -> any Channel {
    let port = Int(url.split(separator: ":").last!)!
    return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .channelInitializer { channel in
            guard let collector else { return channel.eventLoop.makeSucceededVoidFuture() }
            return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) }
        }
        .connect(host: "127.0.0.1", port: port).get()
}

/// What the relay wrote back on a raw connection, as text.
private final class Collector: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let text = NIOLockedValueBox("")

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = Self.unwrapInboundIn(data)
        text.withLockedValue { $0 += String(buffer: buffer) }
    }
}

private func send(_ channel: any Channel, _ text: String) async throws {
    try await channel.writeAndFlush(ByteBuffer(string: text)).get()
}

// A client's stall is cut by the relay; the tests wait for the close itself (the bound only catches a relay that never
// closes).

// MARK: Tests

@Test func aClientThatSendsHalfABodyIsCutAtTheRequestReadTimeout() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS": "0.5", "RC_RELAY_IDLE_TIMEOUT_SECONDS": "3600"])) {
        relay in
        let channel = try await connect(relay.relayURL)
        try await send(
            channel,
            "POST /webhooks/remote-config HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"versionNumber\"")
        try await eventually("the relay closes the stalled connection") { !channel.isActive }
        #expect(await relay.emulator.stats.sendRequests == 0)
    }
}

@Test func aRequestThatFollowsAReadOneOnTheSameConnectionIsCutAtItsOwnDeadline() async throws {
    // The first request's answer must be written before the second's deadline cuts the connection: 3 s, not 0.5 s, so
    // that a loaded machine (the thread sanitizer beside a CPU hog, scripts/soak) answers in time; 0.5 s failed there.
    try await withLiveRelay(.standard.environment(["RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS": "3", "RC_RELAY_IDLE_TIMEOUT_SECONDS": "3600"])) {
        relay in
        let collector = Collector()
        let channel = try await connect(relay.relayURL, collector: collector)
        // One write: a whole request, then a second one's head and part of its body. The one timer of the connection
        // was set for the first request; when it fires, the second is still being read, and is cut at its own deadline.
        try await send(
            channel,
            "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n"
                + "POST /webhooks/remote-config HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"v")
        try await eventually("the relay closes the connection") { !channel.isActive }
        #expect(collector.text.withLockedValue { $0.hasPrefix("HTTP/1.1 200") })
        #expect(await relay.emulator.stats.sendRequests == 0)
    }
}

@Test func aRequestWhoseSignatureHeadersCannotPassIsRefusedBeforeItsBodyIsRead() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS": "600", "RC_RELAY_IDLE_TIMEOUT_SECONDS": "3600"])) {
        relay in
        let now = Int(Date().timeIntervalSince1970)
        let entry = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        let cases = [
            ("no signature headers", ""),
            ("a replay an hour old", "webhook-id: msg_1\r\nwebhook-timestamp: \(now - 3600)\r\nwebhook-signature: \(entry)\r\n"),
            (
                "17 entries",
                "webhook-id: msg_1\r\nwebhook-timestamp: \(now)\r\nwebhook-signature: \(Array(repeating: entry, count: 17).joined(separator: " "))\r\n"
            ),
            ("no entry that can be a MAC", "webhook-id: msg_1\r\nwebhook-timestamp: \(now)\r\nwebhook-signature: v1,short\r\n"),
        ]
        for (name, headers) in cases {
            let collector = Collector()
            let channel = try await connect(relay.relayURL, collector: collector)
            try await send(
                channel,
                "POST /webhooks/remote-config HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\(headers)\r\n{\"v"
            )
            // The body is 59,997 bytes short and never comes: an answer cannot have waited for it.
            try await eventually("\(name): answered 401 without the body") { collector.text.withLockedValue { $0.hasPrefix("HTTP/1.1 401") } }
            try await channel.close()
        }
        #expect(await relay.emulator.stats.sendRequests == 0)
    }
}

@Test func aClientThatDribblesHeaderLinesIsCutAtTheIdleTimeout() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS": "600", "RC_RELAY_IDLE_TIMEOUT_SECONDS": "0.5"])) {
        relay in
        let channel = try await connect(relay.relayURL)
        // On a loaded machine the idle timeout may already have closed it: that is the outcome asked for too.
        try? await send(channel, "POST /webhooks/remote-config HTTP/1.1\r\n")
        var lines = 0
        // One header line every 50 ms never completes a request part, so it never counts as activity: the connection
        // is closed (the event waited for) well within the time limit, however slowly this loop runs.
        let limit = ContinuousClock.now + .seconds(60)
        while channel.isActive, ContinuousClock.now < limit {
            try? await send(channel, "X-Dribble-\(lines): x\r\n")
            lines += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!channel.isActive, "still open after \(lines) header lines in 60 s")
    }
}

@Test func aStalledClientCannotHoldAStopBeyondTheDelayThePlusDrainAndAMargin() async throws {
    try await withLiveRelay(
        .standard.environment([
            "RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS": "600", "RC_RELAY_IDLE_TIMEOUT_SECONDS": "3600", "RC_RELAY_DELIVERY_DRAIN_SECONDS": "0.1",
        ])
    ) { relay in
        let channel = try await connect(relay.relayURL)
        try await send(
            channel, "POST /webhooks/remote-config HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        // A request on another connection answered after it: the server has the stalled one's head by then.
        #expect(try await relay.admin(.GET, "/healthz", token: nil).status == 200)
        await relay.stop()
        // Bounded by shutdownDelaySeconds (0) + drainSeconds (0.1) + RelayProcess.stopMargin (3 s), not by the client.
        try await eventually("the relay stops", within: .seconds(60)) { relay.hasStopped() }
        try await eventually("the stalled connection is closed") { !channel.isActive }
    }
}
