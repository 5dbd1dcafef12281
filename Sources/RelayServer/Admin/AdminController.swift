import DeliveryEngine
import Foundation
import Logging
import OpenAPIRuntime
import RelayCore
import RelayStore

/// The admin API's operations (the gate in front of it checks the bearer token).
struct AdminController: Sendable {
    let configuration: ConfigurationStore
    let engine: DeliveryEngine
    let planner: Planner
    let reloader: Reloader
    /// The delivery history the admin API reads: this process's, or every replica's on the shared store.
    var log: any DeliveryLog
    /// Who delivers a project: asked to discard a ping another process delivers, and to reset shared marks.
    let admission: any Admission
    /// The newest version relayed per project, reset with the marks.
    let marks: RelayMarks?

    init(
        configuration: ConfigurationStore, engine: DeliveryEngine, planner: Planner, reloader: Reloader, log: (any DeliveryLog)? = nil,
        admission: any Admission, marks: RelayMarks? = nil
    ) {
        (self.configuration, self.engine, self.planner, self.reloader) = (configuration, engine, planner, reloader)
        self.log = log ?? engine.history
        (self.admission, self.marks) = (admission, marks)
    }

    var logger: Logger { RequestInfo.current?.logger ?? Logger(label: "rc-relay") }

    func info() -> Components.Schemas.Info {
        let store = configuration
        let configuration = store.current
        return .init(
            name: "rc-relay", version: RelayApplication.version,
            build: .init(configuration: Self.build.configuration, compiler: Self.build.compiler, platform: Self.build.platform),
            startedAt: store.startedAt,
            uptimeSeconds: Int(Date().timeIntervalSince(store.startedAt)),
            configuration: .init(source: store.source, loadedAt: configuration.loadedAt, reloads: store.reloads),
            projects: configuration.projects.ids,
            pace: engine.pacers.all.map { .init(project: $0.project, messagesPerSecond: $0.pacer.rate, current: $0.pacer.current) },
            checks: [])
    }

    func routes() -> Components.Schemas.EffectiveRoutes {
        let configuration = configuration.current
        let settings = configuration.settings
        let projects = configuration.projects.ids.compactMap { id -> Components.Schemas.EffectiveRoutes.ProjectsPayloadPayload? in
            guard let pipeline = configuration.projects[id] else { return nil }
            return .init(
                id: id,
                credentials: .init(kind: .init(rawValue: pipeline.credentials.kind) ?? .keyFile, source: pipeline.credentials.source),
                routes: pipeline.routes.routes.map { route in
                    let sender = pipeline.send.senders[PingPayload.sender(route: route.name)] as? any TargetSender
                    return Components.Schemas.RouteView(route, disabled: sender?.disabledReason)
                })
        }
        return .init(
            webhook: .init(
                auth: .init(rawValue: settings.webhookAuth.rawValue) ?? .hmac, secrets: settings.verifier.secrets.count,
                toleranceSeconds: Int(settings.verifier.tolerance.components.seconds)),
            projects: projects)
    }

    /// The FCM requests an event would cause, what the version changed and each route's decision, as
    /// `POST /admin/preview` answers them.
    struct Preview: Encodable {
        struct Request: Encodable {
            var route: String
            /// An HTTP target's URL shows its scheme and host only: its path and query can be its key.
            var url: String
            var body: Body
        }
        /// FCM's `{"message": …}`, or another target's message (an HTTP target's call) as it would be sent.
        enum Body: Encodable {
            case fcm(FCMMessage)
            case target(any Encodable & Sendable)

            func encode(to encoder: any Encoder) throws {
                switch self {
                case .fcm(let message): try ["message": message].encode(to: encoder)
                case .target(let message): try message.encode(to: encoder)
                }
            }
        }
        typealias Change = ChangeSummary
        struct Decision: Encodable {
            var route: String
            var fires: Bool
            var reason: String
            var targets: [String]
        }
        var project: String
        var versionNumber: String
        var change: Change?
        var routes: [Decision]
        var requests: [Request]
    }

    func preview(_ ask: AdminBodyRoutes.PreviewAsk) async throws(Refusal) -> Preview {
        guard let version = ask.version ?? ask.event?.version else {
            throw Refusal(kind: .invalidRequest, detail: "give either version (a template version) or event (a structured CloudEvent)")
        }
        let (project, pipeline) = try self.pipeline(ask.project ?? ask.event?.project)
        let settings = configuration.current.settings
        let change = await planner.change(
            version, from: ask.since, project: project, pipeline: pipeline, settings: settings, always: ask.explain, preview: true,
            logger: logger)
        let decisions = pipeline.routes.routes.map { route in
            guard route.matches(version) else {
                return Preview.Decision(route: route.name, fires: false, reason: "when.updateTypes or when.origins does not take it", targets: [])
            }
            let decision = route.decide(change)
            var targets = decision.targets.map(\.key)
            if let other = route.destination { targets = decision.fires ? ["\(other.kind):\(route.name)"] : [] }
            if let waves = route.waves, decision.targets == [route.target] {
                targets = (0..<waves.shards).map { FCMMessage.Target.topic(waves.topic(shard: $0)).key }  // each shard, in waves
            }
            return Preview.Decision(route: route.name, fires: decision.fires, reason: decision.reason, targets: targets)
        }
        let requests = pipeline.routes.pings(for: version, project: project, change: change).map { ping in
            switch ping.payload {
            case .fcm(let message):
                return Preview.Request(route: ping.route, url: "\(settings.fcmBaseURL)/v1/projects/\(project)/messages:send", body: .fcm(message))
            case .target(let message):
                let url = pipeline.routes.routes.first { $0.name == message.route }?.destination?.shownURL ?? "-"
                return Preview.Request(route: ping.route, url: url, body: .target(message.preview))
            }
        }
        return Preview(
            project: project, versionNumber: String(version.versionNumber), change: Self.change(change, of: version.versionNumber, since: ask.since),
            routes: decisions, requests: requests)
    }

    static func change(_ change: TemplateChange, of number: Int64, since: Int64?) -> Preview.Change? {
        ChangeSummary(change, of: number, since: since)
    }

    func send(_ request: AdminBodyRoutes.SendAsk) async throws(Refusal) -> Components.Schemas.DeliveryList {
        let version = request.version
        if request.token != nil, request.route == nil {
            throw Refusal(kind: .invalidRequest, detail: "give route with token: one route's ping goes to the device")
        }
        let (project, pipeline) = try self.pipeline(request.project)
        var pings: [Ping]
        if let name = request.route {
            guard let route = pipeline.routes.routes.first(where: { $0.name == name }) else {
                throw Refusal(kind: .notFound, detail: "project '\(project)' has no route named '\(name)'; GET /admin/routes lists them")
            }
            if let message = route.targetMessage(for: version, project: project, change: .notNeeded, audiences: []) {
                guard request.token == nil else {
                    throw Refusal(kind: .invalidRequest, detail: "route '\(name)' has a \(message.kind) target; a token is for an FCM route's ping")
                }
                pings = [Ping(route: route.name, project: project, payload: .target(message))]
            } else {
                // Every shard of a waved route, at once: an operator's send does not wait for turns.
                pings = route.pings(of: route.message(for: version, project: project), project: project).map {
                    Ping(route: $0.route, project: $0.project, message: $0.message)
                }
            }
        } else {
            pings = pipeline.routes.pings(for: version, project: project)
        }
        pings = await described(pings, version: version, project: project, pipeline: pipeline)
        if let token = request.token {
            // As openapi.yaml says: 1 to 4096 characters, none of them whitespace (ECMAScript's \s, as JSON Schema reads it).
            guard (1...4096).contains(token.count), !token.unicodeScalars.contains(where: Self.isSchemaWhitespace) else {
                throw Refusal(kind: .invalidRequest, detail: "token is not a device registration token")
            }
            for index in pings.indices { pings[index].message.target = .token(token) }
        }
        logger.notice(
            "admin send",
            metadata: [
                "project": "\(project)", "version": "\(version.versionNumber)", "routes": "\(pings.map(\.route).joined(separator: ","))",
                "to_device": "\(request.token != nil)", "validate_only": "\(request.validateOnly ?? false)",
            ])
        let batch = DeliveryBatch(version: version, origin: .send, receivedAt: Date(), validateOnly: request.validateOnly ?? false)
        let reports = await engine.send(pings, batch: batch, plan: pipeline.send, logger: logger)
        return .init(deliveries: reports.map { Self.record($0, project: project, batch: batch, toDevice: request.token != nil) })
    }

    /// An operator's pings with each HTTP target's call describing what the version changed (fetched now; FCM's pings
    /// stay as they were made): a call says what a publish changed, whoever sends it.
    func described(_ pings: [Ping], version: TemplateVersion, project: String, pipeline: ProjectDirectory.Pipeline) async -> [Ping] {
        guard pings.contains(where: { $0.payload.sender != "fcm" }) else { return pings }
        let change = await planner.change(
            version, project: project, pipeline: pipeline, settings: configuration.current.settings, always: true, preview: true, logger: logger)
        // The FCM audiences the version's routes ping: those of the pings sent with it, or (a call sent alone) the plan's.
        let fcm = pings.contains { $0.payload.sender == "fcm" } ? pings : pipeline.routes.pings(for: version, project: project, change: change)
        let audiences = fcm.compactMap { ping -> String? in
            guard case .fcm = ping.payload, !ping.payload.audience.isDevice else { return nil }
            return ping.payload.audience.key
        }
        return pings.map { ping in
            guard case .target(let message) = ping.payload, let route = pipeline.routes.routes.first(where: { $0.name == message.route }),
                let described = route.targetMessage(for: version, project: project, change: change, audiences: audiences)
            else { return ping }
            var ping = ping
            ping.payload = .target(described)
            return ping
        }
    }

    func reload() async throws(Refusal) -> Components.Schemas.Reloaded {
        switch await reloader.reload() {
        case .success(let reloaded):
            logger.notice(
                "configuration reloaded through the admin API", metadata: ["restart_required": "\(reloaded.restartRequired.joined(separator: ","))"])
            return .init(status: .reloaded, loadedAt: reloaded.loadedAt, restartRequired: reloaded.restartRequired)
        case .failure(let error):
            // At `error`, as a refused SIGHUP is: the file on disk is not what runs. Its line is the refusal's.
            logger.error(
                "configuration reload refused; the running configuration stays",
                metadata: [
                    "status": "\(ProblemKind.invalidConfiguration.status.code)", "problem": "\(ProblemKind.invalidConfiguration.rawValue)",
                    "reason": "\(error); the running configuration stays",
                ])
            throw Refusal(kind: .invalidConfiguration, detail: "\(error); the running configuration stays", isLogged: true)
        }
    }

    // MARK: - Helpers

    /// How this binary was built.
    static let build: (configuration: Components.Schemas.Info.BuildPayload.ConfigurationPayload, compiler: String, platform: String) = {
        #if DEBUG
            let configuration = Components.Schemas.Info.BuildPayload.ConfigurationPayload.debug
        #else
            let configuration = Components.Schemas.Info.BuildPayload.ConfigurationPayload.release
        #endif
        #if compiler(>=6.3)
            let compiler = "Swift 6.3"
        #elseif compiler(>=6.2)
            let compiler = "Swift 6.2"
        #else
            let compiler = "Swift 6"
        #endif
        var system = utsname()
        uname(&system)
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return (configuration, compiler, "\(text(system.sysname)) \(text(system.machine))")
    }()

    /// JSON Schema's `\s` (ECMAScript's whitespace and line terminators).
    static func isSchemaWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09...0x0D, 0x20, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF: true
        default: false
        }
    }

    /// The project's pipeline; an unknown project is a resource that is not there (404), as an unknown route is.
    func pipeline(_ requested: String?) throws(Refusal) -> (String, ProjectDirectory.Pipeline) {
        let projects = configuration.current.projects
        if requested?.isEmpty == true { throw Refusal(kind: .invalidRequest, detail: "project must not be empty") }
        let project = requested ?? projects.defaultID
        guard let pipeline = projects[project] else {
            throw Refusal(
                kind: .notFound,
                detail: "project '\(project)' is not configured; this relay sends for " + projects.ids.map { "'\($0)'" }.joined(separator: ", "))
        }
        return (project, pipeline)
    }

    /// The answer's record, from the outcome itself (the log may already have let it go on a busy relay).
    static func record(_ report: DeliveryReport, project: String, batch: DeliveryBatch, toDevice: Bool) -> Components.Schemas.DeliveryRecord {
        .init(
            DeliveryHistory.Entry(
                id: report.id ?? "", project: project, route: report.route, version: batch.version, eventID: batch.eventID,
                origin: batch.origin, retryOf: batch.retryOf, toDevice: toDevice, validateOnly: batch.validateOnly || report.status == .validated,
                receivedAt: batch.receivedAt, settledAt: Date(), report: report))
    }

    static func noDelivery(_ id: String) -> Refusal {
        Refusal(kind: .notFound, detail: "no ping '\(id)' in the last pings kept (delivery.historySize)")
    }
}
