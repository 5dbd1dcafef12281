import DeliveryEngine
import Foundation
import Logging
import ServiceLifecycle
import Tracing

#if RC_RELAY_OTEL
    import OTel
#endif

/// Traces, when `tracing.otlpEndpoint` is set: swift-otel's tracer, exporting OTLP over HTTP (protobuf) to the
/// collector, bootstrapped as the process's tracer, so every span (rc-relay's own, and the HTTP client's requests)
/// goes there. The usual `OTEL_*` variables apply over these settings (service name, resource attributes, sampler,
/// exporter headers and endpoint, batch timing); the loader has already refused the values swift-otel lacks.
/// Off, nothing is bootstrapped, and ``Traces`` starts no span at all.
public enum RelayTracing {
    /// Bootstraps the tracer (once per process) and returns the service that batches and exports spans; run it in the
    /// service group before the relay, so it stops after it and sends the last spans. Nil when tracing is off.
    public static func bootstrap(_ settings: RelaySettings.TracingSettings?, logger: Logger) throws -> (any Service)? {
        guard let settings else { return nil }
        // OpenTelemetry's switch for every SDK: off, whatever the file says (swift-otel would refuse to build a tracer).
        if ProcessInfo.processInfo.environment["OTEL_SDK_DISABLED"]?.lowercased() == "true" {
            logger.notice("tracing is off: OTEL_SDK_DISABLED is true")
            return nil
        }
        #if RC_RELAY_OTEL
            var configuration = OTel.Configuration.default
            configuration.serviceName = "rc-relay"
            configuration.resourceAttributes["service.version"] = RelayApplication.version
            // A collector that is down or refuses is swift-otel's to report, in rc-relay's log; it never stops a webhook.
            configuration.diagnosticLogger = .custom(logger)
            configuration.diagnosticLogLevel = .warning
            configuration.logs.enabled = false
            configuration.metrics.enabled = false
            configuration.traces.enabled = true
            configuration.traces.exporter = .otlp
            configuration.traces.otlpExporter.endpoint = settings.tracesURL
            configuration.traces.otlpExporter.protocol = .httpProtobuf
            let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
            InstrumentationSystem.bootstrap(tracer)
            Traces.turnOn()
            return service
        #else
            throw ConfigurationError(
                key: "tracing.otlpEndpoint", problem: "this build has no span exporter (a sanitizer build leaves swift-otel out)",
                fix: "use a debug or release build, or unset it")
        #endif
    }
}
