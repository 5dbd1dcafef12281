import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// Sign-in, sessions and the forms that need one: a session cookie for an admin token, throttled per client; a form
/// needs the session, the page's own origin and the session's CSRF token.
extension ConsoleRoutes {
    func session(_ request: Request) -> ConsoleSessions.Session? {
        sessions.session(Self.cookie(ConsoleSessions.cookieName, in: request), tokens: tokens)
    }

    func signedIn(_ request: Request, _ render: (ConsoleSessions.Session) async -> Response) async -> Response {
        guard let session = session(request) else { return Self.redirect("/console/sign-in") }
        return await render(session)
    }

    /// A state-changing form: it needs a session, a request from the page's own origin, and the session's CSRF token.
    func form(_ request: Request, _ act: (ConsoleSessions.Session, [String: String]) async throws -> Response) async throws -> Response {
        guard let session = session(request) else { return Self.redirect("/console/sign-in") }
        let fields = try await Self.fields(request)
        guard Self.sameOrigin(request), ConsoleSessions.csrfMatches(fields["csrf"], session) else {
            logger.warning("console form refused: no valid CSRF token or another origin", metadata: ["path": "\(request.uri.path)"])
            return page(
                "Refused", "overview", [:], session: session,
                notice: "This form was not sent from this page (its CSRF token is missing or wrong). Reload the page and try again.",
                status: .forbidden)
        }
        return try await act(session, fields)
    }

    func signIn(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let fields = try await Self.fields(request)
        guard Self.sameOrigin(request) else {
            logger.warning(
                "console sign-in refused: the form came from another origin",
                metadata: ["origin": "\(request.headers[HTTPField.Name("Origin")!] ?? "-")", "host": "\(request.head.authority ?? "-")"])
            return page("Sign in", "sign-in", ["error": "This sign-in did not come from this page."], session: nil, status: .forbidden)
        }
        // Checked in the client's turn (the address the trusted proxies vouch for): at once for a client with no wrong
        // token on record, else after the wait its failures earned (8 s at most), whether or not this one is right.
        let address = GuessThrottle.key(RequestInfo.current?.client ?? context.remoteAddress?.ipAddress ?? "unknown")
        let token = fields["token"] ?? ""
        let tokens = tokens
        let outcome = await throttle.attempt(from: address) { !token.isEmpty && AdminGate.matches(token, tokens) }
        guard outcome.accepted, let session = sessions.signIn(token: token, tokens: tokens) else {
            logger.notice("console sign-in refused: not an admin token", metadata: ["client": "\(address)", "waited": "\(outcome.waited)"])
            return page("Sign in", "sign-in", ["error": "That is not an admin token."], session: nil, status: .unauthorized)
        }
        logger.notice("console sign-in")
        var response = Self.redirect("/console")
        response.headers[.setCookie] = cookie(session.id, request: request, maxAge: Int(sessions.lifetime))
        return response
    }

    /// `Secure` when the browser reached the relay over TLS (a proxy in front says so with X-Forwarded-Proto).
    func cookie(_ value: String, request: Request, maxAge: Int) -> String {
        let secure = request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https" || request.head.scheme == "https"
        return "\(ConsoleSessions.cookieName)=\(value); Path=/console; Max-Age=\(maxAge); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    static func cookie(_ name: String, in request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                    return String(parts[1]).trimmingCharacters(in: .whitespaces)
                }
            }
        }
        return nil
    }
}
