extension RelaySettings {
    /// A setting that only a restart applies: its key in the file, and whether two configurations differ in it.
    struct RestartOnly: Sendable {
        let key: String
        let changed: @Sendable (RelaySettings, RelaySettings) -> Bool
    }

    /// Every setting fixed at start, in the order `POST /admin/reload` names them (docs/operations.md lists the same
    /// keys, and a test holds the two together).
    static let restartOnly: [RestartOnly] = [
        .init(key: "server.host") { $0.host != $1.host },
        .init(key: "server.port") { $0.port != $1.port },
        .init(key: "server.shutdownDelaySeconds") { $0.shutdownDelay != $1.shutdownDelay },
        .init(key: "server.idleTimeoutSeconds") { $0.idleTimeout != $1.idleTimeout },
        .init(key: "server.requestReadTimeoutSeconds") { $0.requestReadTimeout != $1.requestReadTimeout },
        .init(key: "server.readinessCacheSeconds") { $0.readinessCache != $1.readinessCache },
        .init(key: "admin.host") { $0.adminHost != $1.adminHost },
        .init(key: "admin.port") { $0.adminPort != $1.adminPort },
        .init(key: "delivery.concurrency") { $0.outboundConcurrency != $1.outboundConcurrency },
        .init(key: "delivery.messagesPerSecond") { $0.messagesPerSecond != $1.messagesPerSecond },
        .init(key: "delivery.spoolDirectory") { $0.spoolDirectory != $1.spoolDirectory },
        .init(key: "store.postgres") { $0.store != $1.store },
        .init(key: "delivery.drainSeconds") { $0.drainGrace != $1.drainGrace },
        .init(key: "delivery.dedupWindowSeconds") { $0.dedupWindow != $1.dedupWindow },
        .init(key: "delivery.dedupMaxEvents") { $0.dedupMaxEvents != $1.dedupMaxEvents },
        .init(key: "delivery.historySize") { $0.historySize != $1.historySize },
        .init(key: "delivery.maxQueuedPings") { $0.maxQueuedPings != $1.maxQueuedPings },
        // A new retry schedule applies to the next ping at once; these two also set the engine's interval for parked
        // events and its supersede window, which are fixed at start.
        .init(key: "delivery.maxDelaySeconds") { $0.retryPolicy.maximumDelay != $1.retryPolicy.maximumDelay },
        .init(key: "delivery.deadlineSeconds") { $0.retryPolicy.deadline != $1.retryPolicy.deadline },
        .init(key: "fcm.timeoutSeconds") { $0.fcmTimeout != $1.fcmTimeout },
        .init(key: "fcm.caFile") { $0.outboundCAFile != $1.outboundCAFile },
        .init(key: "poll.intervalSeconds") { $0.poll?.interval != $1.poll?.interval },
        .init(key: "poll.graceSeconds") { $0.poll?.grace != $1.poll?.grace },
        .init(key: "log.level") { $0.logLevel != $1.logLevel },
        .init(key: "log.format") { $0.logFormat != $1.logFormat },
        .init(key: "tracing.otlpEndpoint") { $0.tracing != $1.tracing },
    ]

    /// The changed settings that only a restart applies.
    static func restartRequired(_ old: RelaySettings, _ new: RelaySettings) -> [String] {
        restartOnly.filter { $0.changed(old, new) }.map(\.key)
    }
}
