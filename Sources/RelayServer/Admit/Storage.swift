import DeliveryEngine
import Logging
import RelayStore
import ServiceLifecycle

/// The storage the settings choose (in memory, the spool on disk, or a shared PostgreSQL), built in two steps around
/// the delivery engine. The storages themselves live in RelayStore, behind its ``Admission`` seam; this is the one place
/// in RelayServer that names them: first what the engine keeps its events in, journals its history to and asks before each
/// request; then, with the engine, the ``Admission`` the rest of the relay goes through.
struct Storage {
    /// Where the engine keeps acknowledged events: nil in memory.
    let spool: (any Spool)?
    /// Where the engine copies its delivery history for other replicas; nil when nothing is shared.
    let journal: (any DeliveryJournal)?
    /// What the engine asks before each FCM request of an event; nil when this process alone delivers.
    let fence: (any DeliveryFence)?
    /// The delivery history every replica reads (the admin API's), nil: the engine's own.
    let deliveryLog: (any DeliveryLog)?
    /// The newest version relayed per project here: kept beside the spool, so it survives a restart as events do.
    let relayed: RelayedVersions
    private let shared: PostgresStore?
    private let claims: LeaseClaims?

    /// What a stop may take beyond the engine's drain for the storage's own hand-over.
    var stopBound: Duration { shared?.flushBound ?? .zero }

    /// `replica`: this process's name, which its leases carry (the same as its pings' history and log lines).
    init(settings: RelaySettings, replica: String, planted: PlantedBugs = [], metrics: RelayMetrics, clock: any DeliveryClock, logger: Logger) throws
    {
        relayed = RelayedVersions(directory: settings.spoolDirectory, writesEachNote: settings.poll != nil, logger: logger)
        if let store = settings.store {
            let shared = try PostgresStore(
                settings: store, logger: logger, holder: replica, clock: clock, observe: { metrics.storeStatement($0, duration: $1, failed: $2) })
            // The leases' lines (taken, lost, released) name the replica, as its pings' lines do.
            var leaseLogger = logger
            leaseLogger[metadataKey: "replica"] = .string(replica)
            let claims = LeaseClaims(confirmation: shared, lease: store.lease, clock: clock, metrics: metrics, logger: leaseLogger, planted: planted)
            (self.shared, self.claims) = (shared, claims)
            (spool, journal, fence, deliveryLog) = (
                shared.outbox, shared.outbox, claims, SharedDeliveryLog(store: shared, keep: settings.historySize)
            )
        } else {
            (shared, claims, journal, fence, deliveryLog) = (nil, nil, nil, nil, nil)
            spool = try settings.spoolDirectory.map(Self.fileSpool)
        }
    }

    /// The admission over the engine, and the services the storage runs: placed before the engine in the service group,
    /// so that they stop after it (its hand-overs are written first).
    func admission(
        engine: DeliveryEngine, configuration: ConfigurationStore, planner: Planner
    ) -> (admission: any Admission, services: [any Service]) {
        if let shared, let claims {
            let host = RelayHost(configuration: configuration, planner: planner, relayed: relayed)
            let leases = ProjectLeases(store: shared, claims: claims, host: host, engine: engine)
            // The pool stops last, then the store: the leases are released once the engine's hand-overs are written.
            return (leases, [shared.pool, shared, leases])
        }
        return spool == nil ? (MemoryAdmission(), []) : (SpoolAdmission(engine: engine), [])
    }

    static func fileSpool(_ directory: String) throws -> any Spool {
        do {
            return try FileSpool(directory: directory)
        } catch {
            throw ConfigurationError(
                key: "delivery.spoolDirectory", problem: "\(directory) cannot be created",
                fix: "point it at a writable directory on a persistent volume")
        }
    }
}

/// What the shared store asks of the relay (``StoreHost``): the configuration in force, the planner, and the newest
/// versions relayed that catch-up polling keeps here.
private struct RelayHost: StoreHost {
    let configuration: ConfigurationStore
    let planner: Planner
    let relayed: RelayedVersions

    var projects: [String] { configuration.current.projects.ids }

    var retention: (dedupWindow: Duration, historySize: Int) {
        let settings = configuration.current.settings
        return (settings.dedupWindow, settings.historySize)
    }

    func plan(for record: EventRecord, since: Int64?, logger: Logger) async -> DeliveryPlan? {
        await planner.plan(record, since: since, in: configuration.current, logger: logger)
    }

    func marksReset(_ project: String, logger: Logger) { relayed.reset(project, logger: logger) }
}
