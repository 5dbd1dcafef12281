import Foundation
import Hummingbird

/// Remote Config's REST API as the relay uses it: `GET …/remoteConfig` (the current template, or `versionNumber=N`)
/// with its `ETag`, and `GET …/remoteConfig:listVersions` paging newest first; a token with the Remote Config (or
/// cloud-platform) scope for the project; Google's error shapes; injected faults (`endpoint: remoteConfig`).
struct RemoteConfigEndpoints {
    let state: EmulatorState

    static let scopes: Set<String> = [
        "https://www.googleapis.com/auth/firebase.remoteconfig", "https://www.googleapis.com/auth/cloud-platform",
    ]

    /// The most versions one page holds (Google's limit) and the default.
    static let maximumPageSize = 300

    func template(_ request: Request, context: EmulatorContext, project: String) async -> Response {
        if let early = await refusal(request, context: context, project: project) { return early }
        let store = state.templates
        let stored: TemplateStore.Stored?
        if let number = request.uri.queryParameters["versionNumber"].map(String.init) {
            guard let number = Int(number), number > 0 else {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: "Invalid value at 'version_number' (TYPE_INT64), \"\(number)\"")
            }
            stored = await store.version(project: project, number: number)
            guard stored != nil else {
                return GoogleErrors.google(404, status: "NOT_FOUND", message: "Version \(number) of the Remote Config template was not found.")
            }
        } else {
            stored = await store.current(project: project)
        }
        guard let stored else {
            // A project that never published has an empty template and no version.
            return GoogleErrors.json(
                ["conditions": [], "parameters": [:]], headers: [.contentType: "application/json; charset=UTF-8", .eTag: "etag-\(project)-0"])
        }
        return GoogleErrors.json(
            stored.templateObject, headers: [.contentType: "application/json; charset=UTF-8", .eTag: stored.etag(project: project)])
    }

    func listVersions(_ request: Request, context: EmulatorContext, project: String) async -> Response {
        if let early = await refusal(request, context: context, project: project) { return early }
        let query = request.uri.queryParameters
        var size = Self.maximumPageSize
        if let text = query["pageSize"].map(String.init) {
            guard let value = Int32(text), value >= 0 else {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: "Invalid value at 'page_size' (TYPE_INT32), \"\(text)\"")
            }
            if value > 0 { size = min(Int(value), Self.maximumPageSize) }
        }
        var versions = await state.templates.versions(project: project)
        if let text = query["endVersionNumber"].map(String.init) {
            // "If specified, must be greater than zero."
            guard let end = Int64(text), end > 0 else {
                return GoogleErrors.google(
                    400, status: "INVALID_ARGUMENT", message: "Invalid value at 'end_version_number' (TYPE_INT64), \"\(text)\"")
            }
            versions = versions.filter { Int64($0.versionNumber) <= end }
        }
        // startTime keeps the versions updated at or after it, endTime those updated before it.
        for (name, field, keep) in [
            ("startTime", "start_time", { (time: Int64, bound: Int64) in time >= bound }),
            ("endTime", "end_time", { (time: Int64, bound: Int64) in time < bound }),
        ] {
            guard let text = query[Substring(name)].map(String.init) else { continue }
            guard let bound = Self.timestamp(text) else {
                return GoogleErrors.google(
                    400, status: "INVALID_ARGUMENT",
                    message: "Invalid value at '\(field)' (type.googleapis.com/google.protobuf.Timestamp), \"\(text)\"")
            }
            // In milliseconds, the precision the versions' times are written in, so a time listed works as a bound.
            versions = versions.filter { keep(Self.milliseconds($0.updateTime), Self.milliseconds(bound)) }
        }
        if let token = query["pageToken"].map(String.init), !token.isEmpty {
            guard token.hasPrefix("before-"), let before = Int(token.dropFirst("before-".count)) else {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: "Invalid page token.")
            }
            versions = versions.filter { $0.versionNumber < before }
        }
        let page = Array(versions.prefix(size))
        var body: [String: Any] = ["versions": page.map(\.versionObject)]
        if versions.count > page.count, let last = page.last { body["nextPageToken"] = "before-\(last.versionNumber)" }
        return GoogleErrors.json(body)
    }

    /// An RFC 3339 timestamp, as a `google-datetime` query parameter is written.
    static func timestamp(_ text: String) -> Date? {
        guard DiscoveryDocument.isTimestamp(text) else { return nil }
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime]] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            // The formatter takes at most milliseconds: finer digits are cut, which no filter here can tell apart.
            let trimmed = text.replacingOccurrences(of: #"(\.[0-9]{3})[0-9]+"#, with: "$1", options: .regularExpression)
            if let date = formatter.date(from: trimmed.uppercased()) { return date }
        }
        return nil
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// A fault's answer, or Google's answer to a missing, stale or foreign token, or a token without the scope.
    private func refusal(_ request: Request, context: EmulatorContext, project: String) async -> Response? {
        await state.noteRemoteConfigRequest()
        if let fault = await state.nextFault(for: "remoteConfig") {
            if let latency = fault.latencyMs, latency > 0 { try? await Task.sleep(for: .milliseconds(latency)) }
            if fault.drop == true {
                try? await context.channel.close()
                return Response(status: .internalServerError)  // never written: the connection is gone
            }
            if let body = fault.body {
                return Response(
                    status: .init(code: fault.status ?? 200), headers: [.contentType: "application/json; charset=UTF-8"],
                    body: .init(byteBuffer: ByteBuffer(string: body)))
            }
            if let status = fault.status {
                return GoogleErrors.google(
                    status, status: SendEndpoint.canonicalStatus(status), message: "Injected fault.", retryAfter: fault.retryAfter)
            }
        }
        guard let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer "),
            let token = await state.token(String(authorization.dropFirst("Bearer ".count)))
        else { return GoogleErrors.unauthenticated }
        guard token.project == project else {
            return GoogleErrors.google(403, status: "PERMISSION_DENIED", message: "The caller does not have permission")
        }
        guard !token.scopes.isDisjoint(with: Self.scopes) else {
            return GoogleErrors.google(403, status: "PERMISSION_DENIED", message: "Request had insufficient authentication scopes.")
        }
        return nil
    }
}

extension FCMEmulatorServer {
    /// Remote Config's two calls, and `/emulator/remote-config/…` to publish and roll back templates.
    static func addRemoteConfig(to router: Router<EmulatorContext>, state: EmulatorState) {
        let endpoints = RemoteConfigEndpoints(state: state)
        router.get("/v1/projects/:project/remoteConfig") { request, context in
            await endpoints.template(request, context: context, project: try context.parameters.require("project"))
        }
        router.get("/v1/projects/:project/remoteConfig:listVersions") { request, context in
            await endpoints.listVersions(request, context: context, project: try context.parameters.require("project"))
        }
        let controls = router.group("emulator/remote-config/:project")
        controls.post("publish") { request, context in
            let project = try context.parameters.require("project")
            let body = try await request.body.collect(upTo: 4 * 1024 * 1024)
            let query = request.uri.queryParameters
            let origin = query["origin"].map(String.init) ?? "REST_API"
            guard TemplateStore.origins.contains(origin) else {
                return GoogleErrors.google(
                    400, status: "INVALID_ARGUMENT", message: "origin must be one of \(TemplateStore.origins.joined(separator: ", "))")
            }
            // A template Remote Config would refuse is refused here too, so what `GET …/remoteConfig` answers is valid
            // by the discovery document.
            do {
                // `etag` is not part of a template's JSON (it is a header), but firebase-admin's `toJSON()` writes it:
                // taken and ignored, as `version` is.
                var template = try JSONParser.parse(Array(buffer: body))
                if case .object(let members) = template { template = .object(members.filter { $0.key != "etag" }) }
                try DiscoveryDocument.remoteConfig.check(template, against: "RemoteConfig")
            } catch let violation as FieldViolation {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: violation.description)
            } catch {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: "Invalid JSON payload received.")
            }
            do {
                let stored = try await state.templates.publish(
                    project: project, template: Data(buffer: body), description: query["description"].map(String.init) ?? "",
                    origin: origin, forced: query["forced"] == "true")
                return GoogleErrors.json(stored.versionObject)
            } catch {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: "\(error)")
            }
        }
        controls.post("rollback") { request, context in
            let project = try context.parameters.require("project")
            guard let number = request.uri.queryParameters["versionNumber"].flatMap({ Int(String($0)) }) else {
                return GoogleErrors.google(400, status: "INVALID_ARGUMENT", message: "versionNumber is required")
            }
            do {
                return GoogleErrors.json(try await state.templates.rollback(project: project, to: number).versionObject)
            } catch {
                return GoogleErrors.google(404, status: "NOT_FOUND", message: "\(error)")
            }
        }
    }
}
