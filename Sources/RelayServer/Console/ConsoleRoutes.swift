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
                guard case .success(let model) = Self.model(request.uri.queryParameters) else {
                    return Self.response(.badRequest, type: "text/plain; charset=utf-8", body: "bad chart settings")
                }
                return Self.response(.ok, type: "image/svg+xml", body: FetchLoadChart(series: FetchLoadChart.compared(model)).svg())
            }
        }
    }

    private var logger: Logger { RequestInfo.current?.logger ?? Logger(label: "rc-relay") }
    private var tokens: [String] { configuration.current.settings.adminTokens }

    // MARK: Sessions and forms

    private func session(_ request: Request) -> ConsoleSessions.Session? {
        sessions.session(Self.cookie(ConsoleSessions.cookieName, in: request), tokens: tokens)
    }

    private func signedIn(_ request: Request, _ render: (ConsoleSessions.Session) async -> Response) async -> Response {
        guard let session = session(request) else { return Self.redirect("/console/sign-in") }
        return await render(session)
    }

    /// A state-changing form: it needs a session, a request from the page's own origin, and the session's CSRF token.
    private func form(_ request: Request, _ act: (ConsoleSessions.Session, [String: String]) async throws -> Response) async throws -> Response {
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

    private func signIn(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let fields = try await Self.fields(request)
        guard Self.sameOrigin(request) else {
            logger.warning(
                "console sign-in refused: the form came from another origin",
                metadata: ["origin": "\(request.headers[HTTPField.Name("Origin")!] ?? "-")", "host": "\(request.head.authority ?? "-")"])
            return page("Sign in", "sign-in", ["error": "This sign-in did not come from this page."], session: nil, status: .forbidden)
        }
        // One attempt at a time per client (the address the trusted proxies vouch for), each after the wait its
        // earlier failures earned, whether or not this one is right: a guesser cannot cut the wait short.
        let address = ConsoleSessions.throttleKey(RequestInfo.current?.client ?? context.remoteAddress?.ipAddress ?? "unknown")
        guard let wait = sessions.beginAttempt(from: address) else {
            logger.notice("console sign-in refused: another attempt from this client is under way", metadata: ["client": "\(address)"])
            return page(
                "Sign in", "sign-in", ["error": "Another sign-in from here is under way; wait for it."], session: nil, status: .tooManyRequests)
        }
        if wait > .zero { try? await Task.sleep(for: wait) }
        let session = sessions.signIn(token: fields["token"] ?? "", tokens: tokens)
        sessions.endAttempt(from: address, failed: session == nil)
        guard let session else {
            logger.notice("console sign-in refused: not an admin token", metadata: ["client": "\(address)", "waited": "\(wait)"])
            return page("Sign in", "sign-in", ["error": "That is not an admin token."], session: nil, status: .unauthorized)
        }
        logger.notice("console sign-in")
        var response = Self.redirect("/console")
        response.headers[.setCookie] = cookie(session.id, request: request, maxAge: Int(sessions.lifetime))
        return response
    }

    /// `Secure` when the browser reached the relay over TLS (a proxy in front says so with X-Forwarded-Proto).
    private func cookie(_ value: String, request: Request, maxAge: Int) -> String {
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

    /// No `Origin` (an older browser, a test client), or one naming the host the browser addressed: `Host`, or the
    /// `X-Forwarded-Host` a trusted proxy sends. Host and port are compared without the scheme, the host in any case,
    /// a missing port as the origin scheme's default (`http://relay` is `relay:80`).
    static func sameOrigin(_ request: Request) -> Bool {
        sameOrigin(
            origin: request.headers[HTTPField.Name("Origin")!], host: request.head.authority,
            forwardedHost: request.headers[HTTPField.Name("X-Forwarded-Host")!], viaTrustedProxy: RequestInfo.current?.viaTrustedProxy ?? false)
    }

    static func sameOrigin(origin: String?, host: String?, forwardedHost: String?, viaTrustedProxy: Bool) -> Bool {
        guard let origin else { return true }
        guard let url = URL(string: origin), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let originHost = url.host
        else { return false }
        let schemeDefault = scheme == "https" ? 443 : 80
        let expected = (bare(originHost), url.port ?? schemeDefault)
        var addressed: [String] = []
        if viaTrustedProxy, let forwardedHost {
            // The first entry: the host the client itself addressed (each proxy on the way appends its own).
            addressed.append(String(forwardedHost.split(separator: ",").first ?? "").trimmingCharacters(in: .whitespaces))
        }
        if let host { addressed.append(host) }
        return addressed.contains { hostAndPort($0, defaultPort: schemeDefault).map { $0 == expected } ?? false }
    }

    /// `host[:port]` as a `Host` header writes it (an IPv6 literal in brackets), lower-cased, the port defaulted.
    static func hostAndPort(_ authority: String, defaultPort: Int) -> (String, Int)? {
        guard !authority.isEmpty else { return nil }
        if authority.hasPrefix("["), let end = authority.firstIndex(of: "]") {
            let rest = authority[authority.index(after: end)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            let port = rest.isEmpty ? defaultPort : Int(rest.dropFirst())
            return port.map { (bare(String(authority[...end])), $0) }
        }
        let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2 else { return nil }
        let port = parts.count == 2 ? Int(parts[1]) : defaultPort
        return port.map { (bare(String(parts[0])), $0) }
    }

    private static func bare(_ host: String) -> String {
        host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
    }

    /// An `application/x-www-form-urlencoded` body (the admin gate bounds its size).
    static func fields(_ request: Request) async throws -> [String: String] {
        var request = request
        return fields(String(buffer: try await request.collectBody(upTo: .max)))
    }

    /// Parsed by hand, never by `URLComponents`: setting its `percentEncodedQuery` to text that is not a valid query
    /// (a raw space, a stray `%`) traps on Linux. What does not decode is an empty value.
    static func fields(_ body: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            let name = decode(parts[0])
            guard !name.isEmpty, fields[name] == nil else { continue }
            fields[name] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    // MARK: Pages

    private func page(
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

    static func response(_ status: HTTPResponse.Status, type: String, body: String, cache: String = "no-store") -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = cache
        headers[HTTPField.Name("Content-Security-Policy")!] = contentSecurityPolicy
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"  // no-referrer would make the browser send Origin: null on its own forms
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func redirect(_ location: String) -> Response {
        var response = response(.seeOther, type: "text/plain; charset=utf-8", body: "")
        response.headers[.location] = location
        return response
    }

    private func overview() async -> [String: Any] {
        let checks = await probes.readiness()
        var publishes: [(key: String, value: [String: Any], pings: [[String: Any]])] = []
        // The store away: the overview still shows readiness, which says so.
        let recent = (try? await admin.history(.init(limit: 300))) ?? []
        for entry in recent where !entry.toDevice && entry.origin != .send {
            let key = "\(entry.project)/\(entry.version.versionNumber)"
            let ping: [String: Any] = ["id": entry.id, "route": entry.route, "status": Self.status(entry), "waiting": entry.waitingFor ?? ""]
            if let index = publishes.firstIndex(where: { $0.key == key }) {
                publishes[index].pings.append(ping)
            } else if publishes.count < 10 {
                publishes.append(
                    (key, ["version": String(entry.version.versionNumber), "project": entry.project, "when": Self.when(entry.receivedAt)], [ping]))
            }
        }
        return [
            "checks": checks.map { ["name": $0.name, "ok": $0.ok, "detail": $0.detail] as [String: Any] },
            "projects": configuration.current.projects.ids,
            "publishes": publishes.map { publish in publish.value.merging(["pings": publish.pings.reversed() as [[String: Any]]]) { $1 } },
        ]
    }

    static let statuses = ["", "pending", "accepted", "validated", "failed", "dead", "superseded", "interrupted"]

    /// The page's data, and whether the filter was refused (a control character: 400).
    private func deliveries(_ query: Parameters, csrf: String) async -> ([String: Any], refused: Bool) {
        let status = query.get("status").flatMap { Self.statuses.contains($0) && !$0.isEmpty ? $0 : nil }
        let route = query.get("route").flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        let project = query.get("project").flatMap { $0.isEmpty ? nil : String($0.prefix(200)) }
        var problem: String?
        var version: Int64?
        if let text = query.get("version"), !text.isEmpty {
            if text.utf8.count <= 19, text.utf8.allSatisfy({ (48...57).contains($0) }), let number = Int64(text) {
                version = number
            } else {
                problem = "A version is a number."
            }
        }
        var entries: [DeliveryHistory.Entry] = []
        var refused = false
        do throws(Refusal) {
            entries = try await admin.history(.init(status: status, route: route, project: project, version: version, limit: 200))
        } catch {
            problem = problem ?? error.detail
            refused = error.kind == .invalidRequest
        }
        let data: [String: Any] = [
            "statuses": Self.statuses.map { ["value": $0, "label": $0.isEmpty ? "any" : $0, "selected": $0 == (status ?? "")] as [String: Any] },
            "route": route ?? "", "project": project ?? "", "version": version.map(String.init) ?? "", "problem": problem ?? "",
            "count": entries.count,
            "rows": entries.map { entry -> [String: Any] in
                [
                    "id": entry.id, "when": Self.when(entry.receivedAt), "project": entry.project, "version": String(entry.version.versionNumber),
                    "route": entry.route, "status": Self.status(entry), "waiting": Self.waiting(entry), "attempts": entry.report?.attempts.count ?? 0,
                    "retryable": Self.retryable(entry), "csrf": csrf,
                ]
            },
        ]
        return (data, refused)
    }

    static func delivery(_ entry: DeliveryHistory.Entry, csrf: String) -> [String: Any] {
        let report = entry.report
        return [
            "id": entry.id, "project": entry.project, "route": entry.route, "version": String(entry.version.versionNumber),
            "status": status(entry), "origin": entry.origin.rawValue, "retryOf": entry.retryOf ?? "",
            "audience": entry.toDevice ? "one device" : (entry.audience?.key ?? "-"), "decision": entry.decision ?? "",
            "waiting": waiting(entry), "received": when(entry.receivedAt), "settled": entry.settledAt.map { when($0) } ?? "",
            "messageName": report?.messageName ?? "", "error": report?.error.map { "\($0.errorCode ?? "-") \($0.message)" } ?? "",
            "retryable": retryable(entry), "csrf": csrf,
            "attempts": (report?.attempts ?? []).enumerated().map { index, attempt -> [String: Any] in
                [
                    "number": index + 1, "at": when(attempt.at), "httpStatus": attempt.httpStatus.map(String.init) ?? "no answer",
                    "errorCode": attempt.errorCode ?? "-",
                ]
            },
        ]
    }

    private func schedules() -> [String: Any] {
        let schedules = admin.engine.schedules
        let quiet = schedules.quietPeriods
        return [
            "waves": schedules.waves.map { wave -> [String: Any] in
                [
                    "route": wave.route, "project": wave.project, "version": String(wave.version), "shards": wave.shards, "sent": wave.sent,
                    "started": Self.when(wave.startedAt), "next": wave.nextSendAt.map { Self.when($0) } ?? "",
                ]
            },
            "hasQuiet": !quiet.isEmpty,
            "quiet": quiet.map {
                ["project": $0.project, "route": $0.route, "audience": $0.audience, "version": String($0.version), "until": Self.when($0.until)]
                    as [String: Any]
            },
        ]
    }

    private func routes() -> [String: Any] {
        let current = configuration.current
        return [
            "projects": current.projects.ids.compactMap { id -> [String: Any]? in
                guard let pipeline = current.projects[id] else { return nil }
                return [
                    "id": id,
                    "routes": pipeline.routes.routes.map { route -> [String: Any] in
                        var when: [String] = []
                        if let types = route.updateTypes { when.append("update types: " + types.sorted().joined(separator: ", ")) }
                        if let origins = route.origins { when.append("origins: " + origins.sorted().joined(separator: ", ")) }
                        if let changed = route.definition.when?.changed {
                            when.append("changes to: " + ((changed.parameters ?? []) + (changed.conditions ?? [])).joined(separator: ", "))
                        }
                        var schedule: [String] = []
                        if route.quiet > .zero { schedule.append("quiet period \(route.quiet.components.seconds) s") }
                        if let waves = route.waves { schedule.append("\(waves.shards) shards over \(waves.spreadSeconds) s (\(waves.topicPattern))") }
                        return [
                            "chart": route.waves.map { "/console/chart?shards=\($0.shards)&spread=\($0.spreadSeconds)" } ?? "",
                            "name": route.name, "target": route.waves.map { "topics \($0.topicPattern)" } ?? route.target.key,
                            "when": when.isEmpty ? "every version" : when.joined(separator: "; "),
                            "data": route.data.map { "\($0.key)=\($0.value)" }.joined(separator: " "),
                            "schedule": schedule.isEmpty ? "at once" : schedule.joined(separator: "; "),
                        ]
                    },
                ]
            }
        ]
    }

    static let updateTypes = ["INCREMENTAL_UPDATE", "FORCED_UPDATE", "ROLLBACK", "REMOTE_CONFIG_UPDATE_TYPE_UNSPECIFIED"]

    private func preview(_ query: Parameters) async -> [String: Any] {
        let projects = configuration.current.projects.ids
        let project = query.get("project").flatMap { projects.contains($0) ? $0 : nil } ?? projects.first ?? ""
        let updateType = query.get("updateType").flatMap { Self.updateTypes.contains($0) ? $0 : nil } ?? Self.updateTypes[0]
        let versionText = query.get("version") ?? ""
        let sinceText = query.get("since") ?? ""
        let explain = query.get("explain") != nil
        var context: [String: Any] = [
            "projects": projects.map { ["id": $0, "selected": $0 == project] as [String: Any] },
            "updateTypes": Self.updateTypes.map { ["value": $0, "selected": $0 == updateType] as [String: Any] },
            "version": versionText, "since": sinceText, "explain": explain,
        ]
        guard !versionText.isEmpty else { return context }
        guard let number = Self.versionNumber(versionText), sinceText.isEmpty || Self.versionNumber(sinceText) != nil else {
            context["problem"] = "A version is a number of 1 to 19 digits, at most 9223372036854775807."
            return context
        }
        let ask = AdminBodyRoutes.PreviewAsk(
            project: project, version: TemplateVersion(versionNumber: number, updateType: updateType), event: nil,
            since: Self.versionNumber(sinceText), explain: explain)
        let preview: AdminController.Preview
        do throws(Refusal) {
            preview = try await admin.preview(ask)
        } catch {
            context["problem"] = error.detail
            return context
        }
        var result: [String: Any] = ["version": preview.versionNumber, "since": preview.change?.since ?? ""]
        if let change = preview.change {
            if change.known {
                result["hasParameters"] = !change.parameters.isEmpty
                result["parameters"] = change.parameters.map { parameter -> [String: Any] in
                    var kind = parameter.kind
                    if parameter.defaultChanged { kind += ", default changed" }
                    if parameter.valueTypeChanged { kind += ", value type changed" }
                    return ["name": parameter.name, "kind": kind, "conditions": parameter.conditions.joined(separator: ", ")]
                }
                result["hasConditions"] = !change.conditions.isEmpty
                result["conditions"] = change.conditions.map { ["name": $0.name, "kind": $0.kind] as [String: Any] }
                result["reordered"] = change.conditionsReordered
                result["nothing"] = change.parameters.isEmpty && change.conditions.isEmpty && !change.conditionsReordered
            } else {
                result["unknown"] = change.reason ?? "the template could not be read"
            }
        } else {
            result["notFetched"] = true
        }
        result["decisions"] = preview.routes.map {
            ["route": $0.route, "fires": $0.fires, "targets": $0.targets.joined(separator: ", "), "reason": $0.reason] as [String: Any]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        result["requests"] = preview.requests.map { request -> [String: Any] in
            ["route": request.route, "json": String(decoding: (try? encoder.encode(request.body)) ?? Data(), as: UTF8.self)]
        }
        context["result"] = result
        return context
    }

    static func versionNumber(_ text: String) -> Int64? {
        guard (1...19).contains(text.utf8.count), text.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Int64(text)
    }

    /// The fetch-load model for a chart's settings; the problem when they do not make one.
    static func model(_ query: Parameters) -> Result<FetchLoadModel, ChartSettingsError> {
        func number(_ name: String, _ fallback: Double, _ range: ClosedRange<Double>) -> Double? {
            guard let text = query.get(name), !text.isEmpty else { return fallback }
            guard let value = Double(text), range.contains(value) else { return nil }
            return value
        }
        guard let devices = number("devices", 1_000_000, 1...1e10), let shards = number("shards", 1, 1...1000),
            let spread = number("spread", 0, 0...86_400), let delay = number("delay", 0, 0...86_400),
            let delivery = number("delivery", 10, 0...3600)
        else {
            return .failure(
                ChartSettingsError(problem: "Devices 1 to 10,000,000,000, shards 1 to 1000, seconds 0 to 86,400 (FCM delivery to 3,600)."))
        }
        let model = FetchLoadModel(devices: devices, shards: Int(shards), spread: spread, clientDelay: delay, delivery: delivery)
        if let problem = model.problem { return .failure(ChartSettingsError(problem: problem)) }
        return .success(model)
    }

    struct ChartSettingsError: Error {
        var problem: String
    }

    static func chart(_ query: Parameters) -> [String: Any] {
        var context: [String: Any] = [
            "devices": query.get("devices") ?? "1000000", "shards": query.get("shards") ?? "1", "spread": query.get("spread") ?? "0",
            "delay": query.get("delay") ?? "0", "delivery": query.get("delivery") ?? "10",
        ]
        switch model(query) {
        case .failure(let error):
            context["problem"] = error.problem
        case .success(let model):
            var items = URLComponents()
            items.queryItems = ["devices", "shards", "spread", "delay", "delivery"].compactMap { name in
                query.get(name).map { URLQueryItem(name: name, value: $0) }
            }
            context["image"] = "/console/chart.svg" + (items.percentEncodedQuery.map { "?" + $0 } ?? "")
            let compared = FetchLoadChart.compared(model)
            context["peaks"] = compared.map { name, series -> [String: Any] in
                let peak = series.peak
                return [
                    "name": name, "peak": FetchLoadChart.number(peak.rate), "at": FetchLoadChart.number(peak.at),
                    "end": FetchLoadChart.number(series.end),
                ]
            }
            context["summary"] = "peak \(FetchLoadChart.number(model.peak.rate)) fetches per second as set"
        }
        return context
    }

    // MARK: Formatting

    static func status(_ entry: DeliveryHistory.Entry) -> String { entry.report?.status.rawValue ?? "pending" }

    static func retryable(_ entry: DeliveryHistory.Entry) -> Bool {
        guard let status = entry.report?.status else { return false }
        return (status == .dead || status == .failed) && !entry.toDevice
    }

    static func waiting(_ entry: DeliveryHistory.Entry) -> String {
        guard let reason = entry.waitingFor else { return "" }
        return entry.waitingUntil.map { "\(reason) until \(when($0))" } ?? reason
    }

    /// `2026-11-25 04:14:40 UTC (3 min ago)`.
    static func when(_ date: Date, now: Date = Date()) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let stamp = String(format: "%04d-%02d-%02d %02d:%02d:%02d UTC", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
        return "\(stamp) (\(relative(date, now: now)))"
    }

    static func relative(_ date: Date, now: Date) -> String {
        let seconds = Int(now.timeIntervalSince(date).rounded())
        let magnitude = abs(seconds)
        let text: String
        switch magnitude {
        case ..<5: return "just now"
        case ..<60: text = "\(magnitude) s"
        case ..<3600: text = "\(magnitude / 60) min"
        case ..<86_400: text = "\(magnitude / 3600) h"
        default: text = "\(magnitude / 86_400) d"
        }
        return seconds >= 0 ? "\(text) ago" : "in \(text)"
    }
}
