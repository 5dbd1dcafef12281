import DequeModule
import Foundation
import JWTKit

/// Everything the emulator remembers: service accounts, issued tokens, accepted messages and queued faults.
public actor EmulatorState {
    /// A service account the token endpoint trusts.
    struct Account {
        var email: String
        var project: String
        var tokenURI: String
        var keys: JWTKeyCollection
    }

    /// A message FCM accepted (`validate_only` requests are counted but not recorded).
    public struct Recorded: Sendable, Codable, Equatable {
        public var name: String
        public var project: String
        /// The request body as received; ``message`` is taken from it when read, so `messages:send` does not pay for
        /// writing JSON again (that was half the emulator's CPU per message).
        public var request: String
        public var receivedAt: Date

        /// The `message` object as received, as JSON text with sorted keys.
        public var message: String {
            let request = try? JSONSerialization.jsonObject(with: Data(request.utf8)) as? [String: Any]
            let message = (try? JSONSerialization.data(withJSONObject: request?["message"] ?? [:], options: [.sortedKeys])) ?? Data("{}".utf8)
            return String(decoding: message, as: UTF8.self)
        }
    }

    /// A failure to inject into the next `messages:send` requests.
    public struct Fault: Sendable, Codable, Equatable {
        /// HTTP status to answer with; nil answers normally (useful with `latencyMs`).
        public var status: Int?
        /// FCM error code placed in `details`, such as `QUOTA_EXCEEDED`.
        public var errorCode: String?
        /// `Retry-After` header value, sent as is.
        public var retryAfter: String?
        /// Delay before answering.
        public var latencyMs: Int?
        /// Close the connection without answering, as a reset or a crashed front end does.
        public var drop: Bool?
        /// `send` (default) for `messages:send`, `token` for the OAuth token endpoint, `remoteConfig` for Remote
        /// Config's `get` and `listVersions`.
        public var endpoint: String?
        /// Answer with this body as it is (status `status`, else 200): garbage, a huge number, a page that loops.
        public var body: String?
        /// How many requests this fault applies to (default 1).
        public var count: Int?
        public init(
            status: Int? = nil, errorCode: String? = nil, retryAfter: String? = nil, latencyMs: Int? = nil,
            drop: Bool? = nil, endpoint: String? = nil, count: Int? = nil, body: String? = nil
        ) {
            self.body = body
            self.drop = drop
            self.endpoint = endpoint
            self.status = status
            self.errorCode = errorCode
            self.retryAfter = retryAfter
            self.latencyMs = latencyMs
            self.count = count
        }
    }

    /// Counters a test can read.
    public struct Stats: Sendable, Codable, Equatable {
        public var tokenRequests = 0
        public var tokensIssued = 0
        public var sendRequests = 0
        public var accepted = 0
        public var validatedOnly = 0
        /// The most `messages:send` requests in progress at once.
        public var maxConcurrentSends = 0
        /// Remote Config `get` and `listVersions` requests.
        public var remoteConfigRequests = 0
        /// `messages:send` requests that came as HTTP/2 streams.
        public var http2Sends = 0
        /// Connections that carried `messages:send` requests (with HTTP/2, many streams share one).
        public var sendConnections = 0
        /// HTTP/2 connections told to go away (``EmulatorState/maxConnectionAge``).
        public var goAways = 0
        /// Answers still queued for `messages:send` (``EmulatorState/inject(_:)``): what a test must use up to end a
        /// storm it began.
        public var sendFaultsQueued = 0
    }

    private var sendsInProgress = 0
    /// When each connection carried its first `messages:send`, and whether it was told to go away.
    private var connections: [ObjectIdentifier: (since: ContinuousClock.Instant, goneAway: Bool)] = [:]
    /// With HTTP/2: a connection that carried a `messages:send` this long ago is told `GOAWAY`, as Google's front ends
    /// end long-lived connections; nil: never.
    public var maxConnectionAge: Duration?

    /// A connection closed: its identity may be reused by the next one.
    func connectionClosed(_ connection: ObjectIdentifier) { connections[connection] = nil }

    /// A `messages:send` begins, on `connection`, as an HTTP/2 stream or not. True when the connection is to be told to
    /// go away now; nil when it is new (the caller tells ``connectionClosed(_:)`` when it closes).
    func beginSend(connection: ObjectIdentifier, http2: Bool) -> Bool? {
        sendsInProgress += 1
        stats.maxConcurrentSends = max(stats.maxConcurrentSends, sendsInProgress)
        if http2 { stats.http2Sends += 1 }
        let now = ContinuousClock.now
        guard let known = connections[connection] else {
            connections[connection] = (now, false)
            stats.sendConnections += 1
            return nil
        }
        guard http2, let age = maxConnectionAge, !known.goneAway, now - known.since >= age else { return false }
        connections[connection]?.goneAway = true
        stats.goAways += 1
        return true
    }

    func endSend() { sendsInProgress -= 1 }

    var accounts: [String: Account] = [:]  // by private_key_id
    var tokens: [String: (project: String, scopes: Set<String>, expiresAt: Date)] = [:]
    /// Remote Config's template history, per project.
    public let templates: TemplateStore
    /// Messages recorded at most: past it the oldest go, so that a long run (a benchmark's millions of messages, a
    /// development session of days) does not grow the emulator without bound. ``Stats/accepted`` counts every one.
    public let messagesKept: Int
    private var recorded: Deque<Recorded> = []
    /// The newest ``messagesKept`` messages, oldest first.
    /// An empty deque is not copied: `Array(_:)` of one writes the count into the runtime's shared empty-array storage,
    /// which the thread sanitizer reports as a race when two emulators do it at once (scripts/soak, run 4 of 2026-11-27).
    public var messages: [Recorded] { recorded.isEmpty ? [] : Array(recorded) }
    public private(set) var stats = Stats()
    /// The raw JWT assertions received at the token endpoint, for tests that check them independently.
    public private(set) var assertions: [String] = []
    var faults: [Fault] = []
    /// Lifetime of issued access tokens, in seconds (Google issues 3599).
    public var tokenLifetime: Int
    /// Latency added to every `messages:send`, in milliseconds.
    public var baseLatencyMs: Int

    /// The project of the metadata server's default service account.
    public let metadataProject: String

    public static let defaultMessagesKept = 100_000

    public init(
        tokenLifetime: Int = 3599, baseLatencyMs: Int = 0, metadataProject: String = "demo-project", templatesKept: Int = 300,
        messagesKept: Int = defaultMessagesKept
    ) {
        self.templates = TemplateStore(kept: templatesKept)
        self.messagesKept = max(messagesKept, 1)
        self.metadataProject = metadataProject
        self.tokenLifetime = tokenLifetime
        self.baseLatencyMs = baseLatencyMs
    }

    /// Trusts a service-account public key for assertions signed with `keyID`.
    public func register(keyID: String, email: String, project: String, tokenURI: String, publicKeyPEM: String) async throws {
        let keys = JWTKeyCollection()
        await keys.add(rsa: try Insecure.RSA.PublicKey(pem: publicKeyPEM), digestAlgorithm: .sha256, kid: JWKIdentifier(string: keyID))
        accounts[keyID] = Account(email: email, project: project, tokenURI: tokenURI, keys: keys)
    }

    func account(keyID: String) -> Account? { accounts[keyID] }

    func noteTokenRequest(assertion: String?) {
        stats.tokenRequests += 1
        if let assertion { assertions.append(assertion) }
    }

    func noteRemoteConfigRequest() { stats.remoteConfigRequests += 1 }

    /// Issues a token with the scopes asked for that the emulator grants (``grantableScopes``); nil when none is.
    func issueToken(project: String, scopes asked: Set<String>) -> (token: String, lifetime: Int)? {
        let scopes = grantableScopes.map { asked.intersection($0) } ?? asked
        guard !scopes.isEmpty else { return nil }
        let token = "ya29.emulator-" + UUID().uuidString.lowercased()
        tokens[token] = (project, scopes, Date().addingTimeInterval(Double(tokenLifetime)))
        stats.tokensIssued += 1
        return (token, tokenLifetime)
    }

    /// A live token's project, scopes and expiry, or nil if unknown or expired.
    func token(_ token: String) -> (project: String, scopes: Set<String>, expiresAt: Date)? {
        guard let entry = tokens[token], entry.expiresAt > Date() else { return nil }
        return entry
    }

    /// Makes every issued token stale at once, as if they had all expired.
    public func expireAllTokens() {
        for key in tokens.keys { tokens[key]?.expiresAt = .distantPast }
    }

    public func inject(_ fault: Fault) {
        faults.append(fault)
        if (fault.endpoint ?? "send") == "send" { stats.sendFaultsQueued += max(fault.count ?? 1, 1) }
    }

    /// Registration tokens (or installation IDs) whose app was uninstalled: a send to one, `validate_only` too, is
    /// answered `404 UNREGISTERED`, as FCM answers a stale token.
    private var unregistered: Set<String> = []
    public func unregister(_ tokens: [String]) { unregistered.formUnion(tokens) }
    func isUnregistered(_ device: String) -> Bool { unregistered.contains(device) }

    /// The scopes this emulator grants, as a workload's access scopes limit them (nil: every scope asked for): a token
    /// carries the ones asked for that are among these.
    public private(set) var grantableScopes: Set<String>?
    public func limitScopes(to scopes: Set<String>?) { grantableScopes = scopes }

    /// Takes the next fault queued for `endpoint` (`send` or `token`), if any.
    func nextFault(for endpoint: String = "send") -> Fault? {
        if endpoint == "send" { stats.sendRequests += 1 }
        guard let index = faults.firstIndex(where: { ($0.endpoint ?? "send") == endpoint }) else { return nil }
        if endpoint == "send" { stats.sendFaultsQueued -= 1 }
        var fault = faults[index]
        let remaining = (fault.count ?? 1) - 1
        if remaining > 0 {
            fault.count = remaining
            faults[index] = fault
        } else {
            faults.remove(at: index)
        }
        return fault
    }

    func record(project: String, request: String, validateOnly: Bool) -> String {
        let name = "projects/\(project)/messages/\(UInt64.random(in: 1_000_000_000_000...9_999_999_999_999))"
        if validateOnly {
            stats.validatedOnly += 1
        } else {
            stats.accepted += 1
            recorded.append(Recorded(name: name, project: project, request: request, receivedAt: Date()))
            if recorded.count > messagesKept { recorded.removeFirst() }
        }
        return name
    }

    /// Forgets recorded messages, assertions, faults and counters (accounts and tokens stay).
    public func reset() {
        recorded = []
        unregistered = []
        grantableScopes = nil
        assertions = []
        faults = []
        stats = Stats()
        connections = [:]
    }

    public func setMaxConnectionAge(_ age: Duration?) { maxConnectionAge = age }

    /// Projects besides its own that every service account may send for, as a role granted on another project allows
    /// (the benchmark's many-project load).
    public private(set) var grantedProjects: Set<String> = []

    public func grant(projects: Set<String>) { grantedProjects = projects }

    /// Whether a token of `tokenProject` may send for `project`.
    func maySend(tokenProject: String, for project: String) -> Bool { tokenProject == project || grantedProjects.contains(project) }
}
