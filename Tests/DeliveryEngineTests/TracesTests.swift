import Testing

@testable import DeliveryEngine

/// Which `traceparent` values are continued: W3C Trace Context's form, and nothing else (anything else starts a new
/// trace, silently).
struct TracesTests {
    static let id = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let span = "00f067aa0ba902b7"

    @Test(arguments: [
        "00-\(id)-\(span)-01", "00-\(id)-\(span)-00", "01-\(id)-\(span)-01-later-fields", "cc-\(id)-\(span)-09",
    ])
    func wellFormed(_ traceparent: String) {
        #expect(Traces.isWellFormed(traceparent))
        #expect(Traces.traceID(traceparent: traceparent) == Self.id)
    }

    @Test(arguments: [
        "", "00", "00-\(id)-\(span)", "00-\(id)-\(span)-01-extra", "ff-\(id)-\(span)-01", "00-\(id.uppercased())-\(span)-01",
        "00-\(String(repeating: "0", count: 32))-\(span)-01", "00-\(id)-0000000000000000-01", "00-\(id)x-\(span)-01",
        "00-\(id)-\(span)-1", "0g-\(id)-\(span)-01", "00_\(id)_\(span)_01", "00-\(id)-\(span)-01\n", "é0-\(id)-\(span)-01",
    ])
    func malformed(_ traceparent: String) {
        #expect(!Traces.isWellFormed(traceparent))
        // With no tracer bootstrapped (tracing off), nothing is ever a context, well formed or not.
        #expect(Traces.context(traceparent: traceparent) == nil)
    }

    @Test func offThereIsNoTraceToName() {
        #expect(Traces.context(traceparent: "00-\(Self.id)-\(Self.span)-01") == nil)
        #expect(Traces.traceparent(of: .topLevel) == nil)
    }
}
