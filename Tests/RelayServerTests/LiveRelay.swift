import AsyncHTTPClient
import DeliveryEngine
import FCMClient
import FCMEmulator
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import RelayCore
import ServiceLifecycle
import Testing

@testable import RelayServer

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

    /// A response: read through the contract's types (`decode`, `problem`, `delivered`, ...); `json` is for answers
    /// the contract does not describe (the emulator's own endpoints).
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: Data
        var json: [String: Any]
        var text: String

        /// The body as `type`, dates as the relay writes them (RFC 3339, with or without fractional seconds).
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .custom { decoder in
                let text = try decoder.singleValueContainer().decode(String.self)
                if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
                return try Date.ISO8601FormatStyle().parse(text)
            }
            return try decoder.decode(type, from: body)
        }

        /// The problem details, when the body is one.
        var problem: Components.Schemas.Problem? { try? decode(Components.Schemas.Problem.self) }
        var problemType: String? { problem?._type.rawValue }
        /// The webhook's `200` answer.
        var delivered: Contract.Delivered { get throws { try decode(Contract.Delivered.self) } }
        /// The records of a delivery list (`GET /admin/deliveries`, `POST /admin/send`).
        var deliveries: [Components.Schemas.DeliveryRecord] { get throws { try decode(Components.Schemas.DeliveryList.self).deliveries } }
        /// One delivery record (`GET /admin/deliveries/{id}`, a retry).
        var record: Components.Schemas.DeliveryRecord { get throws { try decode(Components.Schemas.DeliveryRecord.self) } }
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
        let data = Data(body.readableBytesView)
        let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        var headers: [String: String] = [:]
        for header in response.headers { headers[header.name.lowercased()] = header.value }
        return Answer(status: Int(response.status.code), headers: headers, body: data, json: json, text: String(buffer: body))
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

/// How a test's relay is set up: `.standard`, changed by modifiers that each return a changed copy, as in
/// `withLiveRelay(.standard.environment([...]).routes(...)) { relay in ... }`.
struct RelaySetup: Sendable {
    static let standard = RelaySetup()

    /// The `routes:` section's entries; none leaves the relay's default route.
    private(set) var routesYAML: String?
    /// Environment variables over the harness's quick retries. "EMULATOR" and "KEYFILE" as a value stand for the
    /// emulator's URL and the key file, known only once the emulator runs.
    private(set) var variables: [String: String] = [:]
    /// How long the emulator's access tokens live.
    private(set) var tokenLifetimeSeconds = 3599
    /// Whether `fcm.credentialsFile` names the harness's key file.
    private(set) var usesKeyFile = true
    /// Whether a key file for a second project, `game-b`, is written (`LiveRelay.gameBKeyFile`).
    private(set) var hasSecondProject = false
    /// The `admin:` section's value; none leaves the admin API off.
    private(set) var adminYAML: String? = "{tokens: [\"\(LiveRelay.adminToken)\"]}"
    /// Whether the configuration is read from a file (`LiveRelay.configPath`), so it can be reloaded.
    private(set) var writesConfigFile = false
    /// More YAML sections, given the relay's emulator URL and key files.
    private(set) var extraSections: @Sendable (LiveRelay) -> String = { _ in "" }
    /// The relay's sleep (its shutdown delay).
    private(set) var sleeper: @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) }
    /// The delivery engine's time: retries, the answer's wait, parked events, the drain.
    private(set) var engineClock: any DeliveryClock = SystemDeliveryClock()
    private(set) var webhookYAML: String? = "{secrets: [SECRET]}"
    private(set) var seeding: @Sendable (EmulatorState) async throws -> Void = { _ in }

    func routes(_ yaml: String?) -> RelaySetup { changed { $0.routesYAML = yaml } }
    /// Adds environment variables; a name given again takes the new value.
    func environment(_ variables: [String: String]) -> RelaySetup { changed { $0.variables.merge(variables) { $1 } } }
    func tokenLifetime(_ seconds: Int) -> RelaySetup { changed { $0.tokenLifetimeSeconds = seconds } }
    /// No `fcm.credentialsFile`: credentials come from the environment (metadata server, ADC).
    func withoutKeyFile() -> RelaySetup { changed { $0.usesKeyFile = false } }
    func secondProject() -> RelaySetup { changed { $0.hasSecondProject = true } }
    /// The `admin:` section, or `nil` for none (no admin API).
    func admin(_ yaml: String?) -> RelaySetup { changed { $0.adminYAML = yaml } }
    func configFile() -> RelaySetup { changed { $0.writesConfigFile = true } }
    func extraYAML(_ sections: @escaping @Sendable (LiveRelay) -> String) -> RelaySetup { changed { $0.extraSections = sections } }
    func sleep(_ sleep: @escaping @Sendable (Duration) async -> Void) -> RelaySetup { changed { $0.sleeper = sleep } }
    /// The engine on the test's clock (a ``ManualDeliveryClock`` the test moves).
    func clock(_ clock: any DeliveryClock) -> RelaySetup { changed { $0.engineClock = clock } }
    /// The `webhook:` section; nil leaves it out (poll-only mode). "SECRET" stands for the generated secret.
    func webhook(_ yaml: String?) -> RelaySetup { changed { $0.webhookYAML = yaml } }
    /// Runs before the relay starts, with the emulator up (templates to publish, faults to queue).
    func seed(_ seed: @escaping @Sendable (EmulatorState) async throws -> Void) -> RelaySetup { changed { $0.seeding = seed } }

    private func changed(_ change: (inout RelaySetup) -> Void) -> RelaySetup {
        var copy = self
        change(&copy)
        return copy
    }

    /// Starts the emulator, then a relay configured so (its fcm/webhook/server sections are filled in), and runs `body`.
    func run(_ body: (LiveRelay) async throws -> Void) async throws {
        let state = EmulatorState(tokenLifetime: tokenLifetimeSeconds)
        let (emulatorPorts, emulatorContinuation) = AsyncStream.makeStream(of: Int.self)
        let emulator = try FCMEmulatorServer.buildApplication(state: state, logger: quietLogger) { emulatorContinuation.yield($0) }
        let emulatorGroup = ServiceGroup(services: [emulator], gracefulShutdownSignals: [], logger: quietLogger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await emulatorGroup.run() }
            defer { group.cancelAll() }
            var ports = emulatorPorts.makeAsyncIterator()
            let emulatorURL = "http://127.0.0.1:\(await ports.next()!)"
            let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("rc-relay-test-\(UUID().uuidString).json")
            try await ServiceAccountFactory.make(project: "demo-project", tokenURI: "\(emulatorURL)/token", state: state).write(to: keyFile)
            let gameBKeyFile = keyFile.deletingPathExtension().appendingPathExtension("game-b.json")
            if hasSecondProject {
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
                \(webhookYAML.map { "webhook: " + $0.replacingOccurrences(of: "SECRET", with: "\"\(secret)\"") } ?? "")
                fcm: {\(usesKeyFile ? "credentialsFile: \"\(keyFile.path)\", " : "")baseURL: "\(emulatorURL)"}
                \(adminYAML.map { "admin: \($0)" } ?? "")
                \(routesYAML.map { "routes:\n\($0)" } ?? "")
                \(extraSections(partial))
                """
            // "EMULATOR" and "KEYFILE" in a variable stand for the emulator's URL and key file, known only once it runs.
            // Retries are quick in tests unless a test says otherwise. The read timeout for FCM is long: a test that
            // holds FCM's answers a few hundred milliseconds expects no timeout, and a soak run beside busy loops and
            // another suite made such answers take seconds (issue #34); a test of timeouts sets its own.
            let fastRetries = [
                "RC_RELAY_DELIVERY_BASE_DELAY_SECONDS": "0.02", "RC_RELAY_DELIVERY_MAX_DELAY_SECONDS": "0.2",
                "RC_RELAY_DELIVERY_QUOTA_DELAY_SECONDS": "0.3", "RC_RELAY_DELIVERY_MAX_ATTEMPTS": "3",
                "RC_RELAY_FCM_TIMEOUT_SECONDS": "60",
            ]
            let resolved = fastRetries.merging(variables) { $1 }
                .mapValues { $0 == "EMULATOR" ? emulatorURL : $0 == "KEYFILE" ? keyFile.path : $0 }
            try await seeding(state)
            let loader = ConfigurationLoader(environment: resolved)
            let configPath = keyFile.deletingPathExtension().appendingPathExtension("config.yaml").path
            let settings: RelaySettings
            var reader: (@Sendable () throws -> RelaySettings)?
            if writesConfigFile {
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
                settings: settings, logger: quietLogger, source: writesConfigFile ? configPath : "test", reader: reader,
                onServerRunning: { relayContinuation.yield($0) }, onAdminRunning: { adminContinuation.yield($0) }, sleep: sleeper,
                clock: engineClock)
            let relayGroup = ServiceGroup(services: [relay], gracefulShutdownSignals: [], logger: quietLogger)
            let stopped = NIOLockedValueBox(false)
            group.addTask {
                defer { stopped.withLockedValue { $0 = true } }
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
                configPath: writesConfigFile ? configPath : nil, stop: { await relayGroup.triggerGracefulShutdown() },
                hasStopped: { stopped.withLockedValue { $0 } })
            // On the test's clock, the stop's drain would wait for time that never passes: once stopping, time runs.
            let stopping = {
                (engineClock as? ManualDeliveryClock)?.release()
                await relayGroup.triggerGracefulShutdown()
                await emulatorGroup.triggerGracefulShutdown()
            }
            do {
                try await body(live)
            } catch {
                await stopping()
                throw error
            }
            await stopping()
            try await group.waitForAll()
        }
    }
}

/// Runs `body` against an emulator and a relay set up as `setup` says.
func withLiveRelay(_ setup: RelaySetup = .standard, _ body: (LiveRelay) async throws -> Void) async throws {
    try await setup.run(body)
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
    func settledDeliveries(version: Int, count: Int = 1) async throws -> [Components.Schemas.DeliveryRecord] {
        var found: [Components.Schemas.DeliveryRecord] = []
        try await eventually("\(count) settled ping(s) of version \(version)") {
            found = try await admin(.GET, "/admin/deliveries?version=\(version)").deliveries
            return found.count >= count && found.allSatisfy { $0.status != .pending }
        }
        return found
    }

    /// The one settled ping of a version (the newest, if there are several).
    func settledDelivery(version: Int) async throws -> Components.Schemas.DeliveryRecord {
        try #require(try await settledDeliveries(version: version).first)
    }
}

/// A sleep that lasts until the test says so: time on the test's terms, not the wall clock's.
final class ManualSleep: Sendable {
    private let state = NIOLockedValueBox<(asked: [Duration], waiting: [CheckedContinuation<Void, Never>], released: Bool)>(([], [], false))

    /// The sleeps asked for so far.
    var asked: [Duration] { state.withLockedValue { $0.asked } }

    func sleep(_ duration: Duration) async {
        await withCheckedContinuation { continuation in
            let now = state.withLockedValue { state in
                state.asked.append(duration)
                if !state.released { state.waiting.append(continuation) }
                return state.released
            }
            if now { continuation.resume() }
        }
    }

    /// Ends every sleep, now and later.
    func release() {
        for waiting in state.withLockedValue({ state in
            state.released = true
            defer { state.waiting = [] }
            return state.waiting
        }) { waiting.resume() }
    }
}

/// Moves the engine's clock past each retry wait as it comes, `times` times: no test waits out a real Retry-After.
func advanceThroughRetries(_ clock: ManualDeliveryClock, times: Int) async throws {
    for _ in 1...times {
        await clock.waitForPending()
        clock.advance(by: clock.pendingDelays.max() ?? .zero)
    }
}
