import AsyncHTTPClient
import FCMClient
import FCMEmulator
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import RelayCore
import RelayServer
import ServiceLifecycle
import Testing

/// An emulator and a relay, both real servers on loopback ports, plus a client that signs like a sender.
struct LiveRelay {
    let relayURL: String
    let emulatorURL: String
    let webhookURL: String
    let emulator: EmulatorState
    let secret: String
    let keyFile: String
    /// A second project's key file, trusted by the same emulator.
    let gameBKeyFile: String
    /// Where `/admin/` and `/metrics` are served: the relay's URL unless `admin.port` is set.
    var adminURL = ""
    /// The configuration file, when the test asked for one (to reload it).
    var configPath: String? = nil
    /// Sends the relay a stop signal, as SIGTERM does, without waiting for it to stop.
    var stop: @Sendable () async -> Void = {}
    /// Whether the relay has stopped (its service group returned).
    var hasStopped: @Sendable () -> Bool = { false }
    let client = HTTPClient.shared

    /// The bearer token the harness configures in `admin.tokens`.
    static let adminToken = "test-admin-token-0123456789abcdef"

    /// A response with its body parsed as JSON.
    struct Answer {
        var status: Int
        var headers: [String: String]
        var json: [String: Any]
        var text: String
        var problemType: String? { json["type"] as? String }
    }

    /// Calls the admin API (or any path on the admin listener) with the harness's bearer token unless told otherwise.
    func admin(_ method: HTTPMethod = .GET, _ path: String, json body: String? = nil, token: String? = LiveRelay.adminToken, base: String? = nil)
        async throws -> Answer
    {
        var request = HTTPClientRequest(url: (base ?? adminURL) + path)
        request.method = method
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        return try await send(request)
    }

    /// POSTs `body`, signed with the relay's secret unless `signature` is given.
    func post(
        _ body: String, contentType: String? = "application/json", headers extra: [String: String] = [:],
        id: String = "msg_\(UUID().uuidString)", timestamp: Int64 = Int64(Date().timeIntervalSince1970),
        signature: String? = nil, url: String? = nil
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url ?? webhookURL)
        request.method = .POST
        if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        let signed = StandardWebhookVerifier.sign(id: id, timestamp: timestamp, body: Data(body.utf8), secret: try WebhookSecret(secret))
        request.headers.add(name: "webhook-signature", value: signature ?? signed)
        for (name, value) in extra { request.headers.replaceOrAdd(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: body))
        return try await send(request)
    }

    func send(_ request: HTTPClientRequest) async throws -> Answer {
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView))) as? [String: Any] ?? [:]
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        return Answer(status: Int(response.status.code), headers: headers, json: json, text: String(buffer: body))
    }

    /// The `message` objects the emulator accepted, oldest first.
    func recordedMessages() async -> [[String: Any]] {
        await emulator.messages.map { try! JSONSerialization.jsonObject(with: Data($0.message.utf8)) as! [String: Any] }
    }
}

let quietLogger: Logger = {
    var logger = Logger(label: "test")
    logger.logLevel = .critical
    return logger
}()

/// Starts the emulator, then a relay configured with `yaml` (its fcm/webhook/server sections are filled in).
func withLiveRelay(
    routes: String? = nil, environment: [String: String] = [:], tokenLifetime: Int = 3599, useKeyFile: Bool = true,
    secondProject: Bool = false, admin: String? = "{tokens: [\"\(LiveRelay.adminToken)\"]}", configFile: Bool = false,
    extraYAML: (LiveRelay) -> String = { _ in "" }, sleep: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) },
    _ body: (LiveRelay) async throws -> Void
) async throws {
    let state = EmulatorState(tokenLifetime: tokenLifetime)
    let (emulatorPorts, emulatorContinuation) = AsyncStream.makeStream(of: Int.self)
    let emulator = FCMEmulatorServer.buildApplication(state: state, logger: quietLogger) { emulatorContinuation.yield($0) }
    let emulatorGroup = ServiceGroup(services: [emulator], gracefulShutdownSignals: [], logger: quietLogger)
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await emulatorGroup.run() }
        defer { group.cancelAll() }
        var ports = emulatorPorts.makeAsyncIterator()
        let emulatorURL = "http://127.0.0.1:\(await ports.next()!)"
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-test-\(UUID().uuidString).json")
        try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "\(emulatorURL)/token", state: state).write(to: keyFile)
        let gameBKeyFile = keyFile.deletingPathExtension().appendingPathExtension("game-b.json")
        if secondProject {
            try await ServiceAccountFactory.make(project: "game-b", tokenURI: "\(emulatorURL)/token", state: state).write(to: gameBKeyFile)
        }
        defer {
            try? FileManager.default.removeItem(at: keyFile)
            try? FileManager.default.removeItem(at: gameBKeyFile)
        }
        let secret = WebhookSecret.generate()
        let partial = LiveRelay(
            relayURL: "", emulatorURL: emulatorURL, webhookURL: "", emulator: state, secret: secret, keyFile: keyFile.path,
            gameBKeyFile: gameBKeyFile.path)
        let yaml = """
            server: {port: 0}
            webhook: {secrets: ["\(secret)"]}
            fcm: {\(useKeyFile ? "credentialsFile: \"\(keyFile.path)\", " : "")baseURL: "\(emulatorURL)"}
            \(admin.map { "admin: \($0)" } ?? "")
            \(routes.map { "routes:\n\($0)" } ?? "")
            \(extraYAML(partial))
            """
        // "EMULATOR" and "KEYFILE" in a variable stand for the emulator's URL and key file, known only once it runs.
        // Retries are quick in tests unless a test says otherwise.
        let fastRetries = [
            "RC_RELAY_DELIVERY_BASE_DELAY_SECONDS": "0.02", "RC_RELAY_DELIVERY_MAX_DELAY_SECONDS": "0.2",
            "RC_RELAY_DELIVERY_QUOTA_DELAY_SECONDS": "0.3", "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "3",
        ]
        let resolved = fastRetries.merging(environment) { $1 }
            .mapValues { $0 == "EMULATOR" ? emulatorURL : $0 == "KEYFILE" ? keyFile.path : $0 }
        let loader = ConfigurationLoader(environment: resolved)
        let configPath = keyFile.deletingPathExtension().appendingPathExtension("config.yaml").path
        let settings: RelaySettings
        var reader: (@Sendable () throws -> RelaySettings)?
        if configFile {
            try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
            settings = try loader.load(path: configPath)
            reader = { try loader.load(path: configPath) }
        } else {
            settings = try loader.load(yaml: yaml)
        }
        defer { try? FileManager.default.removeItem(atPath: configPath) }
        let (relayPorts, relayContinuation) = AsyncStream.makeStream(of: Int.self)
        let (adminPorts, adminContinuation) = AsyncStream.makeStream(of: Int.self)
        let relay = try await RelayApplication.build(
            settings: settings, logger: quietLogger, source: configFile ? configPath : "test", reader: reader,
            onServerRunning: { relayContinuation.yield($0) }, onAdminRunning: { adminContinuation.yield($0) }, sleep: sleep)
        let relayGroup = ServiceGroup(services: [relay], gracefulShutdownSignals: [], logger: quietLogger)
        let stopped = Locked(false)
        group.addTask {
            defer { stopped.withLock { $0 = true } }
            try await relayGroup.run()
        }
        var relayIterator = relayPorts.makeAsyncIterator()
        let relayURL = "http://127.0.0.1:\(await relayIterator.next()!)"
        var adminURL = relayURL
        if settings.adminPort != nil {
            var adminIterator = adminPorts.makeAsyncIterator()
            adminURL = "http://127.0.0.1:\(await adminIterator.next()!)"
        }
        let live = LiveRelay(
            relayURL: relayURL, emulatorURL: emulatorURL, webhookURL: relayURL + RelaySettings.webhookPath, emulator: state,
            secret: secret, keyFile: keyFile.path, gameBKeyFile: gameBKeyFile.path, adminURL: adminURL,
            configPath: configFile ? configPath : nil, stop: { await relayGroup.triggerGracefulShutdown() },
            hasStopped: { stopped.withLock { $0 } })
        do {
            try await body(live)
        } catch {
            await relayGroup.triggerGracefulShutdown()
            await emulatorGroup.triggerGracefulShutdown()
            throw error
        }
        await relayGroup.triggerGracefulShutdown()
        await emulatorGroup.triggerGracefulShutdown()
        try await group.waitForAll()
    }
}

let updatedType = "google.firebase.remoteconfig.remoteConfig.v1.updated"
let demoSource = "//firebaseremoteconfig.googleapis.com/projects/demo-project"

func sample(_ name: String) throws -> String {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return try String(contentsOf: root.appendingPathComponent("Tests/Fixtures/samples/\(name)"), encoding: .utf8)
}

func binaryHeaders(id: String = UUID().uuidString, type: String = updatedType, source: String = demoSource) -> [String: String] {
    ["ce-specversion": "1.0", "ce-id": id, "ce-type": type, "ce-source": source]
}

/// Waits for `condition` to hold, checking it as things happen. `limit` bounds a broken relay, not a timing
/// expectation: it is generous, so a loaded machine only makes the wait longer, never flips the verdict.
func eventually(
    _ what: String, within limit: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("never happened: \(what)", sourceLocation: sourceLocation)
    throw CancellationError()
}

/// A temporary spool directory, removed afterwards.
func withSpool(_ body: (String) async throws -> Void) async throws {
    let spool = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-spool-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: spool) }
    try await body(spool)
}

/// The event files in a spool directory (not temporary files or the quarantine).
func spooledFiles(_ spool: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? []).filter { $0.hasSuffix(".json") && !$0.hasPrefix(".") }
}

extension LiveRelay {
    /// The delivery log's records of a version, newest first, once at least `count` exist and none is pending.
    func settledDeliveries(version: Int, count: Int = 1) async throws -> [[String: Any]] {
        var found: [[String: Any]] = []
        try await eventually("\(count) settled ping(s) of version \(version)") {
            found = try await admin(.GET, "/admin/deliveries?version=\(version)").json["deliveries"] as? [[String: Any]] ?? []
            return found.count >= count && found.allSatisfy { ($0["status"] as? String) != "pending" }
        }
        return found
    }

    /// The one settled ping of a version: its status, attempts and error.
    func settledDelivery(version: Int) async throws -> (status: String?, attempts: [[String: Any]], error: [String: Any]?) {
        let record = try await settledDeliveries(version: version).first
        return (record?["status"] as? String, record?["attempts"] as? [[String: Any]] ?? [], record?["error"] as? [String: Any])
    }
}

/// A sleep that lasts until the test says so: time on the test's terms, not the wall clock's.
final class ManualSleep: Sendable {
    private let state = Locked<(asked: [Duration], waiting: [CheckedContinuation<Void, Never>], released: Bool)>(([], [], false))

    /// The sleeps asked for so far.
    var asked: [Duration] { state.withLock { $0.asked } }

    func sleep(_ duration: Duration) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                state.asked.append(duration)
                if !state.released { state.waiting.append(continuation) }
                return state.released
            }
            if now { continuation.resume() }
        }
    }

    /// Ends every sleep, now and later.
    func release() {
        for waiting in state.withLock({ state in
            state.released = true
            defer { state.waiting = [] }
            return state.waiting
        }) { waiting.resume() }
    }
}
