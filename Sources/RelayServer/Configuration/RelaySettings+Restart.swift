extension RelaySettings {
    /// The changed settings that only a restart applies.
    static func restartRequired(_ old: RelaySettings, _ new: RelaySettings) -> [String] {
        var keys: [String] = []
        func check(_ key: String, _ changed: Bool) { if changed { keys.append(key) } }
        check("server.host", old.host != new.host)
        check("server.port", old.port != new.port)
        check("server.shutdownDelaySeconds", old.shutdownDelay != new.shutdownDelay)
        check("server.idleTimeoutSeconds", old.idleTimeout != new.idleTimeout)
        check("server.requestReadTimeoutSeconds", old.requestReadTimeout != new.requestReadTimeout)
        check("server.readinessCacheSeconds", old.readinessCache != new.readinessCache)
        check("admin.host", old.adminHost != new.adminHost)
        check("admin.port", old.adminPort != new.adminPort)
        check("delivery.concurrency", old.outboundConcurrency != new.outboundConcurrency)
        check("delivery.messagesPerSecond", old.messagesPerSecond != new.messagesPerSecond)
        check("delivery.spoolDirectory", old.spoolDirectory != new.spoolDirectory)
        check("store.postgres", old.store != new.store)
        check("delivery.drainSeconds", old.drainGrace != new.drainGrace)
        check("delivery.dedupWindowSeconds", old.dedupWindow != new.dedupWindow)
        check("delivery.dedupMaxEvents", old.dedupMaxEvents != new.dedupMaxEvents)
        check("delivery.historySize", old.historySize != new.historySize)
        check("delivery.maxQueuedPings", old.maxQueuedPings != new.maxQueuedPings)
        // A new retry schedule applies to the next ping at once; these two also set the engine's interval for parked
        // events and its supersede window, which are fixed at start.
        check("delivery.maxDelaySeconds", old.retryPolicy.maximumDelay != new.retryPolicy.maximumDelay)
        check("delivery.deadlineSeconds", old.retryPolicy.deadline != new.retryPolicy.deadline)
        check("fcm.timeoutSeconds", old.fcmTimeout != new.fcmTimeout)
        check("fcm.caFile", old.outboundCAFile != new.outboundCAFile)
        check("poll.intervalSeconds", old.poll?.interval != new.poll?.interval)
        check("poll.graceSeconds", old.poll?.grace != new.poll?.grace)
        check("log.level", old.logLevel != new.logLevel)
        check("log.format", old.logFormat != new.logFormat)
        check("tracing.otlpEndpoint", old.tracing != new.tracing)
        return keys
    }
}
