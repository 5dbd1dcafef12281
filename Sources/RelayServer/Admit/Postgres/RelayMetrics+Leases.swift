import CoreMetrics
import RelayStore

extension RelayMetrics: LeaseMetrics {
    /// Projects whose lease this replica holds (it delivers and polls for them).
    package func leasesHeld(_ count: Int) {
        CoreMetrics.Gauge(label: "rc_relay_store_leases_held", factory: factory).record(count)
    }

    /// This replica stood down from a project because another took its lease over (fencing refused its work), or its
    /// claim lapsed: `reason` is `taken_over` or `lapsed`.
    package func leaseStandDown(project: String, reason: String) {
        counter("rc_relay_store_lease_stand_downs_total", [("project", project), ("reason", reason)]).increment()
    }
}
