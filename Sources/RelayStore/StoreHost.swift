import DeliveryEngine
import Logging

/// What a store that delivers events itself (``ProjectLeases``: the holder of a project's lease sweeps its outbox)
/// asks of the relay that wires it: the configuration in force, the planner, and the marks kept beside the store. The
/// store knows no configuration file, route or HTTP; RelayServer answers these (`Admit/Storage.swift`).
package protocol StoreHost: Sendable {
    /// The projects configured now: the leases to hold.
    var projects: [String] { get }

    /// How long an event's ids deduplicate (`delivery.dedupWindowSeconds`), and how many pings the history keeps
    /// (`delivery.historySize`): what pruning keeps.
    var retention: (dedupWindow: Duration, historySize: Int) { get }

    /// The plan for a kept event under the configuration in force; nil when its project is no longer configured.
    /// `since`: the newest version relayed before it, which change-aware routes measure its change from.
    func plan(for record: EventRecord, since: Int64?, logger: Logger) async -> DeliveryPlan?

    /// An operator reset the project's marks (through any replica): forget the ones kept outside the engine.
    func marksReset(_ project: String, logger: Logger)
}

/// The store's own metrics, recorded by the registry the relay serves (RelayServer's `RelayMetrics`).
package protocol LeaseMetrics: Sendable {
    /// Projects whose lease this replica holds (it delivers and polls for them).
    func leasesHeld(_ count: Int)

    /// This replica stood down from a project because another took its lease over (fencing refused its work), or its
    /// claim lapsed: `reason` is `taken_over` or `lapsed`.
    func leaseStandDown(project: String, reason: String)
}
