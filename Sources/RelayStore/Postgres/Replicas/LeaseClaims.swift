import DeliveryEngine
import Logging
import NIOConcurrencyHelpers

/// What the fence asks of the shared store: whether this replica still holds a lease under the epoch it took it with,
/// and for how long yet by the database's clock (nil: it does not). `PostgresStore` is the one in production; the tests
/// give their own (`LeaseClaimsTests`).
package protocol LeaseConfirmation: Sendable {
    func confirm(_ name: String, epoch: Int64) async throws(StoreError) -> Duration?
}

extension PostgresStore: LeaseConfirmation {}

/// This replica's claims on the projects' leases, and the fence the delivery engine asks before every FCM request of
/// an event. Built before the engine (which takes it as its ``DeliveryFence``); ``ProjectLeases`` renews the claims.
/// Time is the engine's ``DeliveryClock`` (an instant is its `instant()`), so tests drive every branch without waiting.
///
/// Fencing: every take-over raises the lease's epoch. Right before each FCM request of an event, ``refusal(project:)``
/// checks the claim, and asks the database when its epoch has not been confirmed for a third of the lease; a poll's
/// admission carries the epoch it began under. A replica that was paused while another took over stands down before
/// it sends anything more (docs/replicas.md, fencing).
package final class LeaseClaims: DeliveryFence, Sendable {
    let confirmation: any LeaseConfirmation
    /// `store.postgres.leaseSeconds`.
    let lease: Duration
    let clock: any DeliveryClock
    let metrics: any LeaseMetrics
    let logger: Logger

    /// An instant on ``clock``: its `instant()`.
    typealias Instant = Duration

    /// This replica's claim on a project's lease.
    struct Claim {
        /// The claim counts until then: half the lease from before the statement that renewed it (or the check that
        /// confirmed it).
        var until: Instant
        /// The lease's epoch when this replica took it: work decided under it is fenced by it.
        var epoch: Int64
        /// When the database last confirmed the epoch (the renewal's or a check's start).
        var confirmed: Instant

        /// Renewed by a heartbeat sent at `sent`: nobody took the lease meanwhile, so its epoch stands.
        mutating func renewed(at sent: Instant, lease: Duration) {
            until = max(until, sent + lease / 2)
            confirmed = max(confirmed, sent)
        }
    }

    struct State {
        /// Projects whose lease this replica holds.
        var held: [String: Claim] = [:]
        var migrated = false
        /// The last round trip that succeeded, for readiness.
        var lastContact: Instant?
        var lastError: String?
        /// Projects whose outbox is to be swept.
        var toSweep: Set<String> = []
        /// Projects taken over since their last sweep: what FCM accepted for them is read from the shared history first.
        var toSeed: Set<String> = []
        /// The frees count and the projects of the last round that took leases: an idle round takes nothing while
        /// neither moved.
        var lastTake: (frees: Int64, projects: [String])? = nil
        /// A claim lapsed or was dropped, or a take failed: the next round takes, which reads what this replica holds.
        var takeAgain = true
        /// The reset generation of each project's marks this replica has applied; nil until first read (a process
        /// that starts has no marks a reset before it could have moved).
        var resets: [String: Int64]? = nil
    }

    let state = NIOLockedValueBox(State())

    /// Bugs planted for the fault campaign (``PlantedBugs``): none, but in the test-only `rc-relay-planted`.
    let planted: PlantedBugs

    package init(
        confirmation: any LeaseConfirmation, lease: Duration, clock: any DeliveryClock, metrics: any LeaseMetrics, logger: Logger,
        planted: PlantedBugs = []
    ) {
        (self.confirmation, self.lease, self.clock, self.metrics, self.planted) = (confirmation, lease, clock, metrics, planted)
        var logger = logger
        logger[metadataKey: "source"] = "store"
        self.logger = logger
    }

    var now: Instant { clock.instant() }

    static func leaseName(_ project: String) -> String { "project/\(project)" }

    /// Whether this replica delivers the project's events now.
    func holds(_ project: String) -> Bool {
        let now = now
        return state.withLockedValue { ($0.held[project]?.until ?? now) > now }
    }

    /// The epoch of the project's lease while this replica holds it.
    func epoch(_ project: String) -> Int64? {
        let now = now
        return state.withLockedValue { state in state.held[project].flatMap { $0.until > now ? $0.epoch : nil } }
    }

    /// For readiness: the schema is in place and the database answered within the lease.
    var readiness: (ok: Bool, detail: String) {
        let now = now
        return state.withLockedValue { state in
            guard state.migrated else { return (false, "the schema is not in place yet: \(state.lastError ?? "connecting")") }
            guard let contact = state.lastContact, now - contact < lease else {
                return (false, "PostgreSQL has not answered for over \(lease): \(state.lastError ?? "no answer")")
            }
            let held = state.held.filter { $0.value.until > now }.keys.sorted()
            return (true, held.isEmpty ? "reachable; another replica delivers" : "reachable; delivering for \(held.joined(separator: ", "))")
        }
    }

    static let notHeld = "this replica no longer holds the project's lease; it is handed back to the outbox"

    /// Fencing, asked right before each FCM request of an event's delivery: the claim must still count, and when the
    /// database has not confirmed its epoch for a third of the lease (the renewals are late: this replica was paused,
    /// or the database is slow), the database is asked. A lease taken over is refused here, before any request (the
    /// engine then stands the project down); a database that does not answer leaves the claim's own bound (half the
    /// lease, before anyone else can take it). A confirmation counts, as a renewal does, for half the lease from when
    /// it was asked: an answer that took longer than that (the database was slow) is too old to send on.
    package func refusal(project: String) async -> String? {
        let asked = now
        let checksLapse = !planted.contains(.lapseCheck)
        // Lapsed or lost already (the renewal may have said so first): whatever still runs for it stops here.
        guard let claim = state.withLockedValue({ $0.held[project] }), claim.until > asked || !checksLapse else { return Self.notHeld }
        guard asked - claim.confirmed >= lease / 3, !planted.contains(.epochCheck) else { return nil }
        do {
            guard let left = try await confirmation.confirm(Self.leaseName(project), epoch: claim.epoch) else {
                contact()
                if drop(project, epoch: claim.epoch) { lost(project, epoch: claim.epoch) }
                return Self.notHeld
            }
            contact()
            // Half of what the lease has left, as a renewal's half a lease: a yes just before the lease expires (its
            // renewals failed) must not outlast it, or another replica could take it over while this one still sends.
            let until = asked + min(lease, left) / 2
            let answered = now
            state.withLockedValue { state in
                guard var held = state.held[project], held.epoch == claim.epoch else { return }
                held.confirmed = max(held.confirmed, asked)
                held.until = max(held.until, until)
                state.held[project] = held
            }
            return until > answered || !checksLapse ? nil : Self.notHeld
        } catch {
            return claim.until > now || !checksLapse ? nil : Self.notHeld
        }
    }

    /// Drops the claim taken under `epoch`; false when it was gone already (or is a newer one).
    func drop(_ project: String, epoch: Int64) -> Bool {
        state.withLockedValue { state in
            guard state.held[project]?.epoch == epoch else { return false }
            state.held[project] = nil
            state.takeAgain = true
            return true
        }
    }

    /// Counts and logs a stand-down because the store refused work decided under `epoch`.
    func lost(_ project: String, epoch: Int64) {
        metrics.leaseStandDown(project: project, reason: "taken_over")
        logger.warning(
            "project lease lost to another replica: this stale holder stands down before sending anything more",
            metadata: ["project": "\(project)", "epoch": "\(epoch)"])
    }

    func contact() {
        let now = now
        state.withLockedValue {
            $0.lastContact = now
            $0.lastError = nil
        }
    }

    func failed(_ error: any Error, doing what: String) {
        state.withLockedValue { $0.lastError = "\(error)" }
        logger.warning("PostgreSQL did not answer while \(what)", metadata: ["error": "\(error)"])
    }
}
