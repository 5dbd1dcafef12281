import RelayCore

/// How one project's pings are sent: its sender (its credentials) and FCM's rules as configured.
package struct SendPlan: Sendable {
    package var sender: any MessageSender
    package var policy: RetryPolicy
    /// Ask FCM to check every message without delivering it (`fcm.validateOnly`).
    package var validateOnly: Bool
    /// Log every message's JSON at info (the development profile shows what it "sent").
    package var logPings: Bool

    package init(sender: any MessageSender, policy: RetryPolicy, validateOnly: Bool = false, logPings: Bool = false) {
        (self.sender, self.policy, self.validateOnly, self.logPings) = (sender, policy, validateOnly, logPings)
    }
}

/// What delivering one event means: the pings its routes make of it, and how to send them.
package struct DeliveryPlan: Sendable {
    package var pings: [Ping]
    package var send: SendPlan
    /// Pings (by route name) that stand down without a request: a newer version is kept, waiting, for the same
    /// audience, and its ping stands in for them (they end `superseded`).
    package var standDown: Set<String> = []

    package init(pings: [Ping], send: SendPlan) { (self.pings, self.send) = (pings, send) }
}

/// With several replicas on a shared store: whether this replica may still start a request to FCM for a project's
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
    /// FCM requests at once, across all pings.
    package var outboundConcurrency = 64
    /// FCM requests a second per project, on average (a 429 halves it for a while).
    package var messagesPerSecond = 1_000.0
    /// Pings kept in the delivery history.
    package var historySize = 1000
    /// How long an acknowledged event whose retries ran out waits before it is tried again.
    package var parkedRetryInterval: Duration = .seconds(300)
    /// How long a newer version's ping makes an older one waiting to retry stand down (the retry deadline).
    package var supersedeWindow: Duration = .seconds(900)
    /// On stop, how long deliveries under way may take to settle before the rest is handed over to the spool.
    package var drainGrace: Duration = .seconds(10)

    package init() {}
}
