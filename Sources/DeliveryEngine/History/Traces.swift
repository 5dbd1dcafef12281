import Synchronization
import Tracing

/// rc-relay's one door to swift-distributed-tracing: spans, and W3C trace context (`traceparent`, `tracestate`) in and
/// out of a ``ServiceContext`` (to continue a sender's trace, keep an event's trace with it on disk, and name a ping's
/// trace in the delivery history).
///
/// Off (no ``turnOn()``: `tracing.otlpEndpoint` unset), every call here is one relaxed atomic load: no span, not even
/// the no-op tracer's, no task-local bound, no lock taken. Through the no-op tracer instead, a webhook's dozen spans
/// measured up to 10 % more CPU per webhook (docs/performance.md).
package enum Traces {
    /// Whether a tracer is bootstrapped (RelayServer's `RelayTracing`), so spans are worth starting.
    package static var isOn: Bool { on.load(ordering: .relaxed) }

    /// Called once, after the process's tracer is bootstrapped and before anything is traced.
    package static func turnOn() { on.store(true, ordering: .relaxed) }

    private static let on = Atomic<Bool>(false)

    /// `body` in a span, a child of `context` (default: the current one); off, `body(nil)`.
    package static func withSpan<T>(
        _ name: String, context: ServiceContext? = nil, ofKind kind: SpanKind = .internal, _ body: ((any Span)?) async -> T
    ) async -> T {
        guard isOn else { return await body(nil) }
        let span = Tracing.startSpan(name, context: context ?? .current ?? .topLevel, ofKind: kind)
        defer { span.end() }
        return await ServiceContext.withValue(span.context) { await body(span) }
    }

    /// A span to end by hand, a child of the current one; off, nil.
    package static func startSpan(_ name: String, ofKind kind: SpanKind = .internal) -> (any Span)? {
        guard isOn else { return nil }
        return Tracing.startSpan(name, context: .current ?? .topLevel, ofKind: kind)
    }

    /// `body` with `context` (a span's, for what it calls) as the current one; nil, `body()` as it is.
    package static func within<T>(_ context: ServiceContext?, _ body: () async -> T) async -> T {
        guard let context else { return await body() }
        return await ServiceContext.withValue(context) { await body() }
    }

    /// The current span's context, when tracing is on.
    package static var current: ServiceContext? { isOn ? ServiceContext.current : nil }

    /// The context `traceparent` and `tracestate` describe, as a child of nothing else; nil when tracing is off or
    /// `traceparent` is not well formed. ``TraceHeaders`` reads them first, as W3C Trace Context says: a malformed one
    /// starts a new trace without a word, where the tracer would log a warning with the whole header, which any caller
    /// could flood the log with (issue #48). Callers pass a request's headers only once its sender is verified.
    package static func context(traceparent: String?, tracestate: String? = nil) -> ServiceContext? {
        guard isOn, let read = TraceHeaders.read(traceparent: traceparent, tracestate: tracestate) else { return nil }
        var fields = ["traceparent": read.traceparent]
        if let tracestate = read.tracestate { fields["tracestate"] = tracestate }
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(fields, into: &context, using: FieldExtractor())
        return Self.traceparent(of: context) == nil ? nil : context
    }

    /// The `traceparent` of the span `context` holds (nil: no span, or tracing off).
    package static func traceparent(of context: ServiceContext?) -> String? {
        guard isOn, let context else { return nil }
        var fields: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &fields, using: FieldInjector())
        return fields["traceparent"]
    }

    /// The trace id (32 hex digits) of the span `context` holds.
    package static func traceID(of context: ServiceContext?) -> String? {
        traceID(traceparent: traceparent(of: context))
    }

    /// The trace id in a `traceparent` (`00-<trace id>-<span id>-<flags>`).
    package static func traceID(traceparent: String?) -> String? {
        guard let parts = traceparent?.split(separator: "-"), parts.count >= 4, parts[1].utf8.count == 32 else { return nil }
        return String(parts[1])
    }

    private struct FieldExtractor: Extractor {
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }

    private struct FieldInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
    }
}
