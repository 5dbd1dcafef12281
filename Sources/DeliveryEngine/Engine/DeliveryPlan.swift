import Foundation
import RelayCore

/// How one project's pings are sent: its senders (each with its credentials, and its rules for what a failure means),
/// picked by what a ping carries (``PingPayload/sender``), and the retry policy as configured.
package struct SendPlan: Sendable {
    /// The sender of any ping whose own is not in ``senders``.
    package var sender: any MessageSender
    /// Senders by ``PingPayload/sender``: each HTTP target's.
    package var senders: [String: any MessageSender] = [:]
    package var policy: RetryPolicy
    /// Ask the destination to check every message without delivering it (a dry run).
    package var validateOnly: Bool
    /// Log every message's JSON at info (the development profile shows what it "sent").
    package var logPings: Bool

    package init(sender: any MessageSender, policy: RetryPolicy, validateOnly: Bool = false, logPings: Bool = false) {
        (self.sender, self.policy, self.validateOnly, self.logPings) = (sender, policy, validateOnly, logPings)
    }

    /// The sender of a ping that carries `payload`.
    package func sender(for payload: PingPayload) -> any MessageSender { senders[payload.sender] ?? sender }
}

/// What delivering one event means: the pings its routes make of it, and how to send them.
package struct DeliveryPlan: Sendable {
    package var pings: [Ping]
    package var send: SendPlan
    /// Pings (by route name) that stand down without a request: a newer version is kept, waiting, for the same
    /// audience, and its ping stands in for them (they end `superseded`).
    package var standDown: Set<String> = []

    package init(pings: [Ping], send: SendPlan) { (self.pings, self.send) = (pings, send) }

    /// Kept events delivered together (a spool replayed at start, a shared store's sweep), newest version first, each
    /// ping standing down (``standDown``) where a newer one of them pings the same project's audience: a burst kept
    /// during an outage sends its newest version alone. An outlier moves no mark: it neither stands down nor makes
    /// others stand down. `context` rides along (each event's logger).
    package static func newestFirst<Context>(
        _ planned: [(record: EventRecord, plan: DeliveryPlan, context: Context)]
    ) -> [(record: EventRecord, plan: DeliveryPlan, context: Context)] {
        var covered: Set<String> = []
        return planned.sorted { $0.record.version.versionNumber > $1.record.version.versionNumber }.map { record, plan, context in
            guard record.outlier != true else { return (record, plan, context) }
            var plan = plan
            let audiences = plan.pings.map { "\(record.project)/\($0.audience)" }
            plan.standDown = Set(zip(plan.pings, audiences).filter { covered.contains($0.1) }.map(\.0.route))
            covered.formUnion(audiences)
            return (record, plan, context)
        }
    }
}

/// With several replicas on a shared store: whether this replica may still start a request for a project's
/// event, asked right before every attempt. A replica that was paused while another took the project over is told no
/// here before it sends anything more (docs/replicas.md, fencing); the engine then stands the project's deliveries
/// down, each handing what it still owes back to where events are kept.
package protocol DeliveryFence: Sendable {
    /// Nil when a request may start now; else why not, as the ping's log line says it.
    func refusal(project: String) async -> String?
}

/// The engine's bounds, fixed for its life (a reload changes routes and senders, not these).
package struct EngineSettings: Sendable {
    /// How long a settled event's answer is remembered for its duplicates.
    package var dedupWindow: Duration = .seconds(600)
    /// Settled events remembered at most.
    package var dedupCapacity = 1_000
    /// Deliveries under way at most; more are refused until some settle.
    package var maxInFlight = 10_000
    /// Requests at once, across all pings.
    package var outboundConcurrency = 64
    /// Requests a second per project, on average (a 429 halves it for a while).
    package var messagesPerSecond = 1_000.0
    /// Pings kept in the delivery history.
    package var historySize = 1000
    /// How long an acknowledged event whose retries ran out waits before it is tried again.
    package var parkedRetryInterval: Duration = .seconds(300)
    /// How long a newer version's ping makes an older one waiting to retry stand down (the retry deadline).
    package var supersedeWindow: Duration = .seconds(900)
    /// On stop, how long deliveries under way may take to settle before the rest is handed over to the spool.
    package var drainGrace: Duration = .seconds(10)
    /// This process's name among replicas: in each ping's history entry and in the log line of each request, so
    /// an operator (and the fault campaign) knows which replica sent what; a shared store names it too.
    package var replica = EngineSettings.newReplicaID()
    /// The destinations whose request metrics are exported from the start, at zero (``MessageSender/service``).
    package var services: [String] = []
    /// Bugs planted for the fault campaign: none, but in the test-only `rc-relay-planted` (``PlantedBugs``).
    package var planted: PlantedBugs = []

    package init() {}

    /// `host/pid/random`: a restarted process is another replica.
    package static func newReplicaID() -> String {
        "\(ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(UInt32.random(in: 0...UInt32.max))"
    }
}
