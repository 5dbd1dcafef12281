import Crypto
import FCMClient
import Foundation
import NIOConcurrencyHelpers

/// The operator's page's sign-ins: an admin token, entered once in a form, is exchanged for a session whose id lives
/// in an `HttpOnly`, `SameSite=Strict` cookie. The session remembers only a digest of the token it was opened with,
/// so it ends as soon as that token is rotated out of `admin.tokens`; it also ends after ``lifetime`` and on sign-out.
/// Each session has its own CSRF token, which every form that changes something carries.
///
/// Failed sign-ins are slowed down per client address: each answer waits longer than the one before (up to
/// ``maximumDelay``), so guessing a token from a browser form is no faster than through `/admin/` with a bearer.
final class ConsoleSessions: Sendable {
    struct Session: Sendable {
        var id: String
        var csrf: String
        /// SHA-256 of the admin token the session was opened with.
        var token: SHA256Digest
        var expires: Date
    }

    static let cookieName = "rc_console"
    /// How long a session lasts, however much it is used.
    let lifetime: TimeInterval
    /// Sessions kept at most; the oldest ends first.
    static let capacity = 1000
    /// Failed sign-ins remembered per address, and how long.
    static let failureWindow: TimeInterval = 900
    static let maximumDelay: Duration = .seconds(8)

    private struct State {
        var sessions: [String: Session] = [:]
        var failures: [String: (count: Int, last: Date)] = [:]
        /// Clients with a sign-in attempt under way.
        var attempting: Set<String> = []
    }
    /// Clients whose failures are remembered at most; the oldest is forgotten first.
    static let failureCapacity = 10_000
    private let state = NIOLockedValueBox(State())

    init(lifetime: TimeInterval = 8 * 3600) { self.lifetime = lifetime }

    /// Opens a session for a token from `tokens`; nil when it is not one (compared as the admin gate does).
    func signIn(token: String, tokens: [String], now: Date = Date()) -> Session? {
        guard !token.isEmpty, AdminGate.matches(token, tokens) else { return nil }
        let session = Session(
            id: Self.random(), csrf: Self.random(), token: SHA256.hash(data: Data(token.utf8)), expires: now.addingTimeInterval(lifetime))
        state.withLockedValue { state in
            state.sessions = state.sessions.filter { $0.value.expires > now }
            if state.sessions.count >= Self.capacity, let oldest = state.sessions.min(by: { $0.value.expires < $1.value.expires }) {
                state.sessions[oldest.key] = nil
            }
            state.sessions[session.id] = session
        }
        return session
    }

    /// The live session with this id, if its token is still an admin token.
    func session(_ id: String?, tokens: [String], now: Date = Date()) -> Session? {
        guard let id, !id.isEmpty else { return nil }
        return state.withLockedValue { state -> Session? in
            guard let session = state.sessions[id] else { return nil }
            let current = tokens.map { SHA256.hash(data: Data($0.utf8)) }
            guard session.expires > now, current.contains(session.token) else {
                state.sessions[id] = nil
                return nil
            }
            return session
        }
    }

    func signOut(_ id: String) { state.withLockedValue { _ = $0.sessions.removeValue(forKey: id) } }

    /// Starts a sign-in attempt from `client`: how long it must wait first (from its earlier failures), or nil when
    /// an attempt from it is under way already. `oneAtATime: false` (the admin API's bearer checks, which a client may
    /// make in parallel): a client with no failure on record goes at once, without holding the others up.
    func beginAttempt(from client: String, now: Date = Date(), oneAtATime: Bool = true) -> Duration? {
        state.withLockedValue { state in
            let entry = state.failures[client].flatMap { now.timeIntervalSince($0.last) < Self.failureWindow && $0.count > 0 ? $0 : nil }
            if !oneAtATime, entry == nil { return .zero }
            guard state.attempting.insert(client).inserted else { return nil }
            guard let entry else { return .zero }
            return min(.milliseconds(250) * (1 << min(entry.count - 1, 10)), Self.maximumDelay)
        }
    }

    /// Ends the attempt; a failure makes the next one wait longer (0.25 s, doubling, at most ``maximumDelay``), and a
    /// success forgets the client's failures.
    func endAttempt(from client: String, failed: Bool, now: Date = Date()) {
        state.withLockedValue { state in
            state.attempting.remove(client)
            guard failed else {
                state.failures[client] = nil
                return
            }
            var entry = state.failures[client] ?? (0, now)
            if now.timeIntervalSince(entry.last) >= Self.failureWindow { entry.count = 0 }
            entry.count += 1
            entry.last = now
            if state.failures[client] == nil, state.failures.count >= Self.failureCapacity,
                let oldest = state.failures.min(by: { $0.value.last < $1.value.last })
            {
                state.failures[oldest.key] = nil
            }
            state.failures[client] = entry
        }
    }

    /// The throttle's key for a client address: an IPv4 address as itself (also when it arrives IPv4-mapped,
    /// `::ffff:a.b.c.d`, as it does on a listener bound to `::`), an IPv6 address by its /64 (one host usually holds
    /// the whole /64).
    static func throttleKey(_ address: String) -> String {
        guard let bytes = TrustedProxies.bytes(of: TrustedProxies.address(address)) else { return address }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// Whether a form's CSRF token is the session's (compared in constant time).
    static func csrfMatches(_ presented: String?, _ session: Session) -> Bool {
        guard let presented else { return false }
        let a = SHA256.hash(data: Data(presented.utf8))
        let b = SHA256.hash(data: Data(session.csrf.utf8))
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
