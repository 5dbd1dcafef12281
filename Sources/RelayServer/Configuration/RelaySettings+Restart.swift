extension RelaySettings {
    /// The changed settings that only a restart applies.
    static func restartRequired(_ old: RelaySettings, _ new: RelaySettings) -> [String] {
        var keys: [String] = []
        func check(_ key: String, _ changed: Bool) { if changed { keys.append(key) } }
        check("server.host", old.host != new.host)
        check("server.port", old.port != new.port)
        check("server.shutdownDelaySeconds", old.shutdownDelay != new.shutdownDelay)
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
