import Tracing

/// W3C trace context (`traceparent`, `tracestate`) in and out of a ``ServiceContext``, through whatever tracer the
/// process bootstrapped (none: every answer is nil, and nothing is parsed). Used to continue a sender's trace, to keep
/// an event's trace with it on disk, and to name a ping's trace in the delivery history.
package enum Traces {
    /// The context `fields` (`traceparent`, `tracestate`) describe, as a child of nothing else; nil when they
    /// describe none the tracer accepts.
    package static func context(traceparent: String?, tracestate: String? = nil) -> ServiceContext? {
        // Checked here first: a malformed one starts a new trace without a word (W3C Trace Context), where the tracer
        // would log a warning for each, which any caller could flood the log with.
        guard let traceparent, isWellFormed(traceparent) else { return nil }
        var fields = ["traceparent": traceparent]
        if let tracestate { fields["tracestate"] = tracestate }
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(fields, into: &context, using: FieldExtractor())
        return Self.traceparent(of: context) == nil ? nil : context
    }

    /// `version-traceid-spanid-flags` in lower-case hex, of 2, 32, 16 and 2 digits, neither id all zeros, version not `ff`
    /// (a later version may add fields after a dash).
    static func isWellFormed(_ traceparent: String) -> Bool {
        let parts = traceparent.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[1].count == 32, parts[2].count == 16, parts[3].count == 2 else { return false }
        let hex = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
        }
        guard parts[0...3].allSatisfy({ $0.allSatisfy(hex) }), !parts[0].elementsEqual("ff".utf8) else { return false }
        guard parts.count == 4 || !parts[0].elementsEqual("00".utf8) else { return false }
        return !parts[1].allSatisfy { $0 == UInt8(ascii: "0") } && !parts[2].allSatisfy { $0 == UInt8(ascii: "0") }
    }

    /// The `traceparent` of the span `context` holds (nil: no span, or tracing off).
    package static func traceparent(of context: ServiceContext?) -> String? {
        guard let context else { return nil }
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
