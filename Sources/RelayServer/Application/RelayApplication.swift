import AsyncHTTPClient
import DeliveryEngine
import FCMClient
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import OpenAPIHummingbird
import RelayCore
import RelayStore
import ServiceLifecycle
import Tracing

/// Builds the relay from its settings: the one place where the parts are wired together.
public enum RelayApplication {
    /// The service's name and version, as `/healthz` and logs report them.
    public static let version = "0.1.0"

    /// Builds the relay. `onServerRunning` receives the bound port (useful with port 0), `onAdminRunning` the admin
    /// listener's when `admin.port` is set. `reader` reads the configuration file again for reloads. `sleep` waits out
    /// `server.shutdownDelaySeconds` on a stop, and `clock` is the delivery engine's time (tests give their own).
    public static func build(
        settings: RelaySettings, logger: Logger, source: String = "development profile",
        reader: (@Sendable () throws -> RelaySettings)? = nil,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        onAdminRunning: @escaping @Sendable (Int) async -> Void = { _ in },
        sleep: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) },
        clock: any DeliveryClock = SystemDeliveryClock()
    ) async throws -> RelayProcess {
        try await build(
            settings: settings, logger: logger, source: source, reader: reader, onServerRunning: onServerRunning, onAdminRunning: onAdminRunning,
            sleep: sleep, clock: clock, planted: [])
    }

    /// The same, with bugs planted: only the test-only `rc-relay-planted` passes any (``PlantedBugs``).
    package static func build(
        settings: RelaySettings, logger: Logger, source: String, reader: (@Sendable () throws -> RelaySettings)?,
        onServerRunning: @escaping @Sendable (Int) async -> Void, onAdminRunning: @escaping @Sendable (Int) async -> Void,
        sleep: @escaping @Sendable (Duration) async -> Void, clock: any DeliveryClock, planted: PlantedBugs
    ) async throws -> RelayProcess {
        let httpClient = makeHTTPClient(settings)
        let targetClients = HTTPTargetClients()
        let metrics = RelayMetrics()
        let rebuild: @Sendable (RelaySettings) async throws -> RelayConfiguration = { settings in
            try await makeConfiguration(settings, httpClient: httpClient, targetClients: targetClients, metrics: metrics, logger: logger)
        }
        let store: ConfigurationStore
        let engine: DeliveryEngine
        let storage: Storage
        let planner = Planner(changes: TemplateChanges(metrics: metrics), clock: clock, metrics: metrics)
        do {
            store = ConfigurationStore(try await rebuild(settings), source: source)
            var engineSettings = engineSettings(settings)
            engineSettings.planted = planted
            storage = try Storage(
                settings: settings, replica: engineSettings.replica, planted: planted, metrics: metrics, clock: clock, logger: logger)
            let relayed = storage.relayed
            engine = DeliveryEngine(
                settings: engineSettings, spool: storage.spool, metrics: metrics.factory, clock: clock, logger: logger,
                journal: storage.journal, fence: storage.fence,
                replan: { await planner.plan($0, since: relayed.newest($0.project), in: store.current, logger: logger) })
        } catch {
            try? await httpClient.shutdown()
            await targetClients.shutdown()
            throw error
        }
        let drain = DrainState()
        let reloader = Reloader(configuration: store, reader: reader, rebuild: rebuild)
        let (admission, stored) = storage.admission(engine: engine, configuration: store, planner: planner)
        let path = EventPath(
            engine: engine, planner: planner, admission: admission, marks: RelayMarks(local: storage.relayed, admission: admission),
            versions: VersionCheck(clock: clock, metrics: metrics))
        let probes = Probes(
            configuration: store, drain: drain, engine: engine, metrics: metrics, cacheFor: settings.readinessCache, admission: admission,
            clock: clock)
        let admin = AdminController(
            configuration: store, engine: engine, planner: planner, reloader: reloader, log: storage.deliveryLog,
            admission: admission, marks: path.marks)
        let api = RelayAPI(probes: probes, admin: admin)
        let controller = WebhookController(configuration: store, path: path, metrics: metrics)
        let ingest = IngestRoutes(intake: WebhookIntake(configuration: store, drain: drain, metrics: metrics), controller: controller)
        let server = httpServer(settings)
        let console = ConsoleRoutes(
            admin: api.admin, probes: api.probes, configuration: store, sessions: ConsoleSessions(), throttle: GuessThrottle(clock: clock))
        let main = Listener(
            router: try makeRouter(
                api, ingest: ingest, console: console, configuration: store, listener: settings.adminPort == nil ? .only : .main, logger: logger),
            server: server, address: .hostname(settings.host, port: settings.port), serverName: "rc-relay",
            // Shut down in reverse: the engine drains while the HTTP client is still up, and while the storage still
            // runs; the storage stops once the engine's hand-overs are written.
            services: stored + [HTTPClientService(client: httpClient), targetClients, engine]
                + poller(settings, store, path, clock, metrics, logger),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? settings.port) },
            logger: logger)
        var services: [any Service] = [main]
        if let adminPort = settings.adminPort {
            services.append(
                Listener(
                    router: try makeRouter(api, ingest: ingest, console: console, configuration: store, listener: .admin, logger: logger),
                    server: server, address: .hostname(settings.adminHost, port: adminPort), serverName: "rc-relay-admin",
                    onServerRunning: { channel in await onAdminRunning(channel.localAddress?.port ?? adminPort) },
                    logger: logger))
        }
        // Stopped first, in reverse: readiness turns false before any listener closes.
        services += [
            ReloadOnHangup(reloader: reloader, logger: logger),
            DrainGate(drain: drain, metrics: metrics, delay: settings.shutdownDelay, logger: logger, sleep: sleep),
        ]
        return RelayProcess(
            services: services, logger: logger, stopWithin: settings.shutdownDelay + settings.drainGrace + storage.stopBound + RelayProcess.stopMargin
        )
    }

    /// Catch-up polling, when `poll.intervalSeconds` is set (stopped before the engine, which it feeds).
    static func poller(
        _ settings: RelaySettings, _ store: ConfigurationStore, _ path: EventPath, _ clock: any DeliveryClock, _ metrics: RelayMetrics,
        _ logger: Logger
    ) -> [any Service] {
        guard let poll = settings.poll else { return [] }
        let poller = CatchUpPoller(
            settings: .init(interval: poll.interval, grace: poll.grace), configuration: store, path: path, clock: clock, metrics: metrics,
            logger: logger)
        return [poller]
    }

    /// The one outbound HTTP client: FCM, Remote Config, OAuth, the metadata server, JWKS.
    static func makeHTTPClient(_ settings: RelaySettings) -> HTTPClient {
        HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration(settings))
    }

    /// That client's configuration.
    static func clientConfiguration(_ settings: RelaySettings) -> HTTPClient.Configuration {
        // Each request has its own deadline (FCM's, Remote Config's); the read timeout between two reads is the longer
        // of the two, so that a `remoteConfig.timeoutSeconds` above `fcm.timeoutSeconds` is not cut short.
        let read = max(settings.fcmTimeout, settings.remoteConfigTimeout).components.seconds
        var client = HTTPClient.Configuration(
            timeout: .init(connect: .seconds(min(5, settings.fcmTimeout.components.seconds)), read: .seconds(read)),
            // The pool's default of 8 HTTP/1 connections per host would silently cap `delivery.concurrency`.
            connectionPool: .init(
                idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: settings.outboundConcurrency))
        // With tracing off, no tracer: by default the client opens a span per request on the global (no-op) tracer,
        // which measured 2 % of the relay's CPU per webhook and records nothing. With it on, each request to Google
        // is a span, a child of the FCM attempt or Remote Config call that made it.
        client.tracing.tracer = settings.tracing == nil ? nil : InstrumentationSystem.tracer
        if let caFile = settings.outboundCAFile {
            // Beside the system's roots, not instead: Google's own certificates still verify.
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.file(caFile)]
            client.tlsConfiguration = tls
        }
        return client
    }

    /// The engine's bounds, from the settings bound at start.
    static func engineSettings(_ settings: RelaySettings) -> EngineSettings {
        var engine = EngineSettings()
        engine.dedupWindow = settings.dedupWindow
        engine.dedupCapacity = settings.dedupMaxEvents
        engine.maxInFlight = settings.maxQueuedPings
        engine.outboundConcurrency = settings.outboundConcurrency
        engine.messagesPerSecond = settings.messagesPerSecond
        engine.historySize = settings.historySize
        engine.parkedRetryInterval = settings.retryPolicy.maximumDelay
        engine.supersedeWindow = settings.retryPolicy.deadline
        engine.drainGrace = settings.drainGrace
        // FCM's, and each service a route's other target sends to, exported at zero from the start.
        let services = settings.projects.flatMap { $0.routes.routes.compactMap { $0.destination?.service } }
        engine.services = [FCMMessageSender.service] + Set(services).sorted()
        return engine
    }

    /// HTTP/1.1 with the idle and request-read timeouts: no client holds a connection, its buffers or a stop.
    static func httpServer(_ settings: RelaySettings) -> HTTPServerBuilder {
        let (seconds, attoseconds) = settings.requestReadTimeout.components
        let readLimit = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        let (idleSeconds, idleAttoseconds) = settings.idleTimeout.components
        let idle = TimeAmount.nanoseconds(idleSeconds * 1_000_000_000 + idleAttoseconds / 1_000_000_000)
        return .http1(configuration: .init(additionalChannelHandlers: [RequestReadDeadline(limit: readLimit)], idleTimeout: idle))
    }

    /// What a reload rebuilds: each project's pipeline and the ID-token verifier.
    static func makeConfiguration(
        _ settings: RelaySettings, httpClient: HTTPClient, targetClients: HTTPTargetClients, metrics: RelayMetrics, logger: Logger
    ) async throws -> RelayConfiguration {
        RelayConfiguration(
            settings: settings,
            projects: try await makeProjects(settings, httpClient: httpClient, targetClients: targetClients, metrics: metrics, logger: logger),
            idTokens: try await makeIDTokenVerifier(settings.oidc, httpClient: httpClient), loadedAt: Date())
    }

    /// One listener's routes, behind the request log and the admin gate: the ingest routes, and the rest generated
    /// from `openapi.yaml`.
    static func makeRouter(
        _ api: RelayAPI, ingest: IngestRoutes, console: ConsoleRoutes, configuration: ConfigurationStore, listener: AdminGate.Listener,
        logger: Logger
    ) throws -> Router<RelayRequestContext> {
        let router = Router(context: RelayRequestContext.self)
        router.add(middleware: RequestLogMiddleware(configuration: configuration, logger: logger))
        router.add(middleware: AdminGate(listener: listener, configuration: configuration, throttle: console.throttle))
        ingest.register(on: router)
        AdminBodyRoutes(admin: api.admin).register(on: router)
        console.register(on: router)
        try api.registerHandlers(
            on: router,
            // Compact JSON: pretty-printing (the generator's default) costs CPU on every answer and helps no machine.
            configuration: .init(dateTranscoder: DateFormat(), jsonEncodingOptions: [.sortedKeys]),
            middlewares: [ProblemMiddleware()])
        return router
    }
}

/// The relay as one service: its listeners and helpers in a group of their own, stopped in reverse order.
public struct RelayProcess: Service {
    let services: [any Service]
    let logger: Logger
    /// The most a graceful stop may take (`shutdownDelaySeconds + drainSeconds +` the storage's hand-over, `Storage.stopBound`,
    /// `+` ``stopMargin``); past it, whatever still runs (a request that will not finish) is cancelled. Kept events stay
    /// for the next start.
    let stopWithin: Duration

    /// What a stop may take beyond the shutdown delay and the drain: closing listeners, keeping what is undelivered, the HTTP client.
    public static let stopMargin: Duration = .seconds(3)

    public func run() async throws {
        var configuration = ServiceGroupConfiguration(
            services: services.map(ServiceGroupConfiguration.ServiceConfiguration.named), gracefulShutdownSignals: [], cancellationSignals: [],
            logger: logger)
        configuration.maximumGracefulShutdownDuration = stopWithin
        let group = ServiceGroup(configuration: configuration)
        // Tasks run on Swift's global executor: an event-loop task executor preference measured 17 % fewer webhooks/s
        // (docs/performance.md).
        try await group.run()
    }

    /// Runs until SIGTERM or SIGINT, then stops gracefully. `first`: services that start before the relay and stop
    /// after it (the span exporter, ``RelayTracing``, which then sends the last spans).
    public func runService(after first: [any Service] = []) async throws {
        let group = ServiceGroup(
            configuration: .init(
                services: (first + [self]).map(ServiceGroupConfiguration.ServiceConfiguration.named), gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}

extension ServiceGroupConfiguration.ServiceConfiguration {
    /// The service, named in the group's log lines and errors by its type. The library's default name is the service
    /// printed whole, by reflection, when the group is built: the relay's services hold its router and configuration,
    /// and printing them was a fifth of the CPU from process start to the first webhook (docs/performance.md).
    static func named(_ service: any Service) -> Self {
        .init(service: service, serviceName: "\(type(of: service))")
    }
}
