import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Keeps each listener to its paths and locks the admin API: `/admin/` needs a bearer token from `admin.tokens`
/// (all compared, each in constant time), and does not exist when none is configured.
struct AdminGate: RouterMiddleware {
    typealias Context = RelayRequestContext

    /// Which listener this is.
    enum Listener: Sendable {
        /// The only listener: everything.
        case only
        /// The public listener beside an admin one: no `/admin/`, no `/metrics`.
        case main
        /// The admin listener: only `/admin/` and `/metrics`.
        case admin
    }

    let listener: Listener
    let configuration: ConfigurationStore
    /// The throttle the operator's page's sign-ins use too: a client's wrong bearer tokens put its next checks later,
    /// as wrong sign-ins do; a right token is always checked, and accepted.
    let throttle: GuessThrottle

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        // Decided on segments, as the router matches them: `//admin/info` and `/metrics/` are the same routes.
        let first = Self.firstSegment(of: path)
        let isAdmin = first == "admin"
        // The operator's page lives with the admin API, and signs in with its own session (ConsoleRoutes).
        let isConsole = first == "console"
        let onAdminListener = isAdmin || isConsole || (first == "metrics" && path.split(separator: "/").count == 1)
        // Answered here, not thrown: a path this listener does not serve is not there at all (404), whatever the method.
        // Made only when answered: every webhook passes here (issue #35).
        func notHere() -> Problem {
            Problem(.notFound, detail: "\(request.method) \(path) is not served here", requestID: RequestInfo.current?.id ?? "")
        }
        switch listener {
        case .main where onAdminListener, .admin where !onAdminListener:
            return notHere().response()
        default:
            break
        }
        guard isAdmin || isConsole else { return try await next(request, context) }
        let tokens = configuration.current.settings.adminTokens
        guard !tokens.isEmpty else { return notHere().response() }
        // The console signs in with its own session (ConsoleRoutes); the admin API needs a bearer token.
        if isAdmin, await !authorized(request, context: context, tokens: tokens) {
            var response = Self.refused(
                .unauthorized, "send Authorization: Bearer with a token from admin.tokens", why: "no valid bearer token", path: path)
            response.headers[.wwwAuthenticate] = "Bearer realm=\"rc-relay admin\""
            return response
        }
        // Admin and console bodies are bounded as webhooks are: on Content-Length, then while reading.
        let limit = configuration.current.settings.maxBodyBytes
        let tooLarge = { Self.refused(.bodyTooLarge, "the body is larger than \(limit) bytes", why: "the body is too large", path: path) }
        if let declared = request.headers[.contentLength].flatMap(Int.init), declared > limit { return tooLarge() }
        var request = request
        do {
            _ = try await request.collectBody(upTo: limit)
        } catch is NIOTooManyBytesError {
            return tooLarge()
        } catch {
            // Shorter than its Content-Length, or the connection ended: a body that could not be read, not a large one.
            return Self.refused(.invalidRequest, "the body could not be read", why: "the body could not be read", path: path)
        }
        return try await next(request, context)
    }

    /// The gate's answer to a request it refuses, logged once with its status, problem and reason.
    private static func refused(_ kind: ProblemKind, _ detail: String, why: String, path: String) -> Response {
        var refusal = Refusal(kind: kind, detail: detail)
        if let logger = RequestInfo.current?.logger { refusal = refusal.logged("admin request refused: \(why)", to: logger, ["path": "\(path)"]) }
        return refusal.response(requestID: RequestInfo.current?.id ?? "")
    }

    /// The path's first non-empty segment (`//admin/info` → `admin`), without splitting the whole path.
    static func firstSegment(of path: String) -> Substring {
        let rest = path.drop { $0 == "/" }
        return rest.prefix { $0 != "/" }
    }

    /// Whether the request carries an admin token, checked in its client's turn (``GuessThrottle``, by the address the
    /// trusted proxies vouch for).
    private func authorized(_ request: Request, context: Context, tokens: [String]) async -> Bool {
        let client = GuessThrottle.key(RequestInfo.current?.client ?? context.remoteAddress?.ipAddress ?? "unknown")
        let presented = Self.bearer(request.headers[.authorization])
        return await throttle.attempt(from: client) { presented.map { Self.matches($0, tokens) } == true }.accepted
    }

    static func bearer(_ header: String?) -> String? {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
        return String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }

    /// Compares digests, so neither length nor content leaks through timing; every token is checked.
    static func matches(_ presented: String, _ tokens: [String]) -> Bool {
        let digest = SHA256.hash(data: Data(presented.utf8))
        var found = false
        for token in tokens {
            let expected = SHA256.hash(data: Data(token.utf8))
            var difference: UInt8 = 0
            for (a, b) in zip(digest, expected) { difference |= a ^ b }
            found = found || difference == 0
        }
        return found
    }
}
