import DeliveryEngine
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import RelayCore

/// The operator's page (`/console`): server-rendered HTML over what the admin API already serves, for the people who
/// publish templates. It lives beside `/admin/` (same listener; absent when no admin token is configured), signs in
/// with an admin token exchanged for a session cookie, and needs no script: every action is a form carrying the
/// session's CSRF token. Every answer forbids framing, scripts and caching (`Content-Security-Policy`).
struct ConsoleRoutes: Sendable {
    let admin: AdminController
    let probes: Probes
    let configuration: ConfigurationStore
    let sessions: ConsoleSessions
    /// Sign-ins are checked in their client's turn, with `/admin/`'s bearer tokens.
    let throttle: GuessThrottle

    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    func register(on router: Router<RelayRequestContext>) {
        router.get("/console/style.css") { _, _ in
            Self.response(.ok, type: "text/css; charset=utf-8", body: ConsoleTemplates.css, cache: "max-age=3600")
        }
        router.get("/console/sign-in") { request, _ in
            if session(request) != nil { return Self.redirect("/console") }
            return page("Sign in", "sign-in", [:], session: nil)
        }
        router.post("/console/sign-in") { request, context in try await signIn(request, context) }
        router.post("/console/sign-out") { request, _ in
            try await form(request) { session, _ in
                sessions.signOut(session.id)
                logger.notice("console sign-out")
                var response = Self.redirect("/console/sign-in")
                response.headers[.setCookie] = cookie("", request: request, maxAge: 0)
                return response
            }
        }
        router.get("/console") { request, _ in
            await signedIn(request) { session in page("Overview", "overview", await overview(), session: session, current: "overview") }
        }
        router.get("/console/deliveries") { request, _ in
            await signedIn(request) { session in
                let (data, refused) = await deliveries(request.uri.queryParameters, csrf: session.csrf)
                return page("Deliveries", "deliveries", data, session: session, current: "deliveriesPage", status: refused ? .badRequest : .ok)
            }
        }
        router.get("/console/deliveries/:id") { request, context in
            let id = context.parameters.get("id") ?? ""
            return await signedIn(request) { session in
                let found: DeliveryHistory.Entry?
                do throws(Refusal) {
                    found = try await admin.historyEntry(id)
                } catch {
                    return page(
                        "Not available", "overview", await overview(), session: session, notice: error.detail,
                        status: error.kind == .invalidRequest ? .badRequest : .serviceUnavailable)
                }
                guard let entry = found else {
                    return page(
                        "No such ping", "overview", await overview(), session: session, notice: "No ping '\(id)' in the pings kept.",
                        status: .notFound)
                }
                return page("Ping \(id)", "delivery", Self.delivery(entry, csrf: session.csrf), session: session, current: "deliveriesPage")
            }
        }
        router.post("/console/deliveries/:id/retry") { request, context in
            let id = context.parameters.get("id") ?? ""
            return try await form(request) { session, _ in
                do throws(Refusal) {
                    let retried = try await admin.retry(id)
                    logger.notice("console retry", metadata: ["retry_of": "\(id)", "delivery_id": "\(retried.id)"])
                    return Self.redirect("/console/deliveries/\(retried.id)")
                } catch {
                    return page("Not retried", "overview", await overview(), session: session, notice: error.detail, status: .conflict)
                }
            }
        }
        router.get("/console/schedules") { request, _ in
            await signedIn(request) { session in page("Waves and quiet periods", "schedules", schedules(), session: session, current: "schedulesPage")
            }
        }
        router.get("/console/routes") { request, _ in
            await signedIn(request) { session in page("Routes", "routes", routes(), session: session, current: "routesPage") }
        }
        router.get("/console/preview") { request, _ in
            await signedIn(request) { session in
                page("Preview a version", "preview", await preview(request.uri.queryParameters), session: session, current: "previewPage")
            }
        }
        router.get("/console/chart") { request, _ in
            await signedIn(request) { session in
                page("Fetch load of a publish", "chart", Self.chart(request.uri.queryParameters), session: session, current: "chartPage")
            }
        }
        router.get("/console/chart.svg") { request, _ in
            await signedIn(request) { _ in
                guard case .success(let chart) = Self.chart(settings: request.uri.queryParameters) else {
                    return Self.response(.badRequest, type: "text/plain; charset=utf-8", body: "bad chart settings")
                }
                return Self.response(.ok, type: "image/svg+xml", body: chart.svg())
            }
        }
        router.get("/console/chart.png") { request, _ in
            await signedIn(request) { _ in
                guard case .success(let chart) = Self.chart(settings: request.uri.queryParameters) else {
                    return Self.response(.badRequest, type: "text/plain; charset=utf-8", body: "bad chart settings")
                }
                return Self.response(.ok, type: "image/png", bytes: ByteBuffer(bytes: chart.png()))
            }
        }
    }

    var logger: Logger { RequestInfo.current?.logger ?? Logger(label: "rc-relay") }
    var tokens: [String] { configuration.current.settings.adminTokens }

    // MARK: Pages

    func page(
        _ title: String, _ template: String, _ context: [String: Any], session: ConsoleSessions.Session?, current: String? = nil,
        notice: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        var layout: [String: Any] = [
            "title": title, "body": ConsoleTemplates.render(template, context), "version": RelayApplication.version,
            "signedIn": session != nil, "csrf": session?.csrf ?? "",
        ]
        if let current { layout[current] = true }
        if let notice { layout["notice"] = notice }
        return Self.response(status, type: "text/html; charset=utf-8", body: ConsoleTemplates.render("layout", layout))
    }
}
