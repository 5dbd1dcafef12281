import Testing

@testable import DeliveryEngine

/// Which `traceparent` and `tracestate` values are continued: W3C Trace Context's form, read as the recommendation
/// says (a later version by its first 55 characters), and nothing else: anything else starts a new trace, silently.
struct TracesTests {
    static let id = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let span = "00f067aa0ba902b7"

    @Test(arguments: [
        ("00-\(id)-\(span)-01", "00-\(id)-\(span)-01"), ("00-\(id)-\(span)-00", "00-\(id)-\(span)-00"),
        ("00-\(id)-\(span)-03", "00-\(id)-\(span)-03"),
        // A later version: its first 55 characters, only the sampled flag, written as version 00.
        ("01-\(id)-\(span)-01", "00-\(id)-\(span)-01"), ("01-\(id)-\(span)-01-later-fields", "00-\(id)-\(span)-01"),
        ("cc-\(id)-\(span)-09", "00-\(id)-\(span)-01"), ("cc-\(id)-\(span)-0b", "00-\(id)-\(span)-01"),
        ("fe-\(id)-\(span)-02", "00-\(id)-\(span)-00"), ("01-\(id)-\(span)-00-", "00-\(id)-\(span)-00"),
    ])
    func wellFormed(_ traceparent: String, _ read: String) {
        #expect(TraceHeaders.traceparent(traceparent) == read)
        #expect(TraceHeaders.read(traceparent: traceparent, tracestate: nil)?.traceparent == read)
        #expect(Traces.traceID(traceparent: read) == Self.id)
    }

    @Test(arguments: [
        "", "00", "00-\(id)-\(span)", "00-\(id)-\(span)-01-extra", "ff-\(id)-\(span)-01", "00-\(id.uppercased())-\(span)-01",
        "00-\(String(repeating: "0", count: 32))-\(span)-01", "00-\(id)-0000000000000000-01", "00-\(id)x-\(span)-01",
        "00-\(id)-\(span)-1", "0g-\(id)-\(span)-01", "00_\(id)_\(span)_01", "00-\(id)-\(span)-01\n", "é0-\(id)-\(span)-01",
        "01-\(id)-\(span)-01x", "01-\(id)-\(span)-0", "00-\(id)-\(span)-0G", "00-\(id)-\(span)-01,00-\(id)-\(span)-01",
        " 00-\(id)-\(span)-01",
    ])
    func malformed(_ traceparent: String) {
        #expect(TraceHeaders.traceparent(traceparent) == nil)
        #expect(TraceHeaders.read(traceparent: traceparent, tracestate: "a=b") == nil)
        // With no tracer bootstrapped (tracing off), nothing is ever a context, well formed or not.
        #expect(Traces.context(traceparent: traceparent) == nil)
    }

    @Test(arguments: [
        ("rojo=00f067aa0ba902b7", "rojo=00f067aa0ba902b7"),
        ("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
        ("\tcongo=a b ,,  rojo=1\t", "congo=a b,rojo=1"), ("tenant@vendor=x", "tenant@vendor=x"), ("1tenant@v=x", "1tenant@v=x"),
        ("a/b*c_d-e=~!", "a/b*c_d-e=~!"),
        // 32 members, within 512 bytes.
        ((0..<32).map { "k\($0)=v" }.joined(separator: ","), (0..<32).map { "k\($0)=v" }.joined(separator: ",")),
    ])
    func stateWellFormed(_ tracestate: String, _ read: String) {
        #expect(TraceHeaders.tracestate(tracestate) == read)
        #expect(TraceHeaders.read(traceparent: "00-\(Self.id)-\(Self.span)-01", tracestate: tracestate)?.tracestate == read)
    }

    @Test(arguments: [
        "Rojo=1", "rojo", "rojo=", "=1", "rojo=a,b", "rojo=a=b", "1abc=x", "a@b@c=x", "a@1b=x", "a@bcdefghijklmnop=x", "rojo=1,rojo=2",
        "rojo=\u{7}", "rojo=é", String(repeating: "a", count: 257) + "=x", "k=" + String(repeating: "v", count: 257),
        (0..<33).map { "k\($0)=v" }.joined(separator: ","),
        "a=" + String(repeating: "v", count: 200) + ",b=" + String(repeating: "v", count: 200)
            + ",c=" + String(repeating: "v", count: 200),
        String(repeating: "x=y,", count: 2048),
    ])
    func stateMalformedIsDroppedAlone(_ tracestate: String) {
        #expect(TraceHeaders.tracestate(tracestate) == nil)
        // The traceparent still counts.
        let read = TraceHeaders.read(traceparent: "00-\(Self.id)-\(Self.span)-01", tracestate: tracestate)
        #expect(read?.traceparent == "00-\(Self.id)-\(Self.span)-01")
        #expect(read?.tracestate == nil)
    }

    @Test func offThereIsNoTraceToName() {
        #expect(Traces.context(traceparent: "00-\(Self.id)-\(Self.span)-01") == nil)
        #expect(Traces.traceparent(of: .topLevel) == nil)
    }
}
