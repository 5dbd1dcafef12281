import Crypto
import FCMClient
import Foundation
import NIOConcurrencyHelpers

/// The operator's page's sign-ins: an admin token, entered once in a form, is exchanged for a session whose id lives
/// in an `HttpOnly`, `SameSite=Strict` cookie. The session remembers only a digest of the token it was opened with,
/// so it ends as soon as that token is rotated out of `admin.tokens`; it also ends after ``lifetime`` and on sign-out.
/// Each session has its own CSRF token, which every form that changes something carries.
///
/// Sign-ins are checked in their client's turn (``GuessThrottle``, shared with `/admin/`'s bearer tokens), so guessing
/// a token from a browser form is no faster than through `/admin/` with a bearer.
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

    private struct State {
        var sessions: [String: Session] = [:]
    }
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
