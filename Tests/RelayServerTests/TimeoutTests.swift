import Foundation
import NIOCore
import NIOPosix
import Testing

/// A raw TCP connection to the relay, for clients that do not behave.
private func connect(_ url: String) async throws -> any Channel {
    let port = Int(url.split(separator: ":").last!)!
    return try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(host: "127.0.0.1", port: port).get()
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

@Test func aClientThatDribblesHeaderLinesIsCutAtTheIdleTimeout() async throws {
    try await withLiveRelay(.standard.environment(["RC_RELAY_REQUEST_READ_TIMEOUT_SECONDS": "600", "RC_RELAY_IDLE_TIMEOUT_SECONDS": "0.5"])) {
        relay in
        let channel = try await connect(relay.relayURL)
        // On a loaded machine the idle timeout may already have closed it: that is the outcome asked for too.
        try? await send(channel, "POST /webhooks/remote-config HTTP/1.1\r\n")
        var lines = 0
        // One header line every 50 ms never completes a request part, so it never counts as activity.
        while channel.isActive, lines < 1200 {
            try? await send(channel, "X-Dribble-\(lines): x\r\n")
            lines += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!channel.isActive, "still open after \(lines) header lines")
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
