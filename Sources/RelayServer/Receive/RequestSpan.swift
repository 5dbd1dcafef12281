import DeliveryEngine
import HTTPTypes
import Hummingbird
import Tracing

/// When intake's stages ran, so that the request's spans can be drawn once their parent is known: a Pub/Sub push
/// names the publisher's trace inside its body (`googclient_traceparent`), which is read only after it is verified.
struct IntakeStages: Sendable {
    typealias Instant = DefaultTracerClock.Instant
    let started = DefaultTracerClock.now
    /// When the sender was proven (the body read, its signature checked); nil: refused before.
    var verified: Instant?
    /// When the body was decoded into an event; nil: refused before.
    var decoded: Instant?
}

/// The span of a webhook or Pub/Sub push (`POST /webhooks/remote-config`), with `verify` and `decode` as children,
/// continuing the caller's W3C trace context: the push's message attributes first, then the request's `traceparent`
/// header; without either, a new trace. The handler runs as its child, and the answer carries `traceresponse`
/// (W3C Trace Context level 2) naming the trace, which the access line logs too.
///
/// Only a verified sender's request is traced: one refused before its sender was proven has no span, and its
/// `traceparent` and `tracestate` are never read, so it costs what it costs with tracing off, and its sampled flag
/// decides nothing (issue #48, docs/operations.md).
enum RequestSpan {
    static func run(
        _ request: Request, stages: IntakeStages, refused: Refusal? = nil, event: VerifiedEvent? = nil,
        _ handle: ((any Span)?) async -> Response
    ) async -> Response {
        guard Traces.isOn, stages.verified != nil else { return await handle(nil) }
        let header = Traces.context(traceparent: request.headers[.traceparent], tracestate: request.headers[.tracestate])
        let pushed = event.flatMap { Traces.context(traceparent: $0.event.traceParent, tracestate: $0.event.traceState) }
        let span = startSpan(
            "\(request.method) \(request.uri.path)", at: stages.started, context: pushed ?? header ?? .topLevel, ofKind: .server)
        if pushed != nil, let header { span.addLink(SpanLink(context: header, attributes: ["rc_relay.link": "the push request's traceparent"])) }
        span.attributes["http.request.method"] = request.method.rawValue
        span.attributes["url.path"] = request.uri.path
        if let info = RequestInfo.current {
            span.attributes["rc_relay.request_id"] = info.id
            span.attributes["client.address"] = info.client
        }
        if let event {
            span.attributes["rc_relay.event_id"] = event.event.id ?? event.webhookID
            span.attributes["rc_relay.format"] = event.event.format.rawValue
            span.attributes["rc_relay.version"] = event.event.version.versionNumber
        }
        stage("verify", from: stages.started, to: stages.verified, refused: refused, in: span)
        if let verified = stages.verified { stage("decode", from: verified, to: stages.decoded, refused: refused, in: span) }
        var response = await ServiceContext.withValue(span.context) { await handle(span) }
        span.attributes["http.response.status_code"] = Int(response.status.code)
        if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
        if let traceparent = Traces.traceparent(of: span.context) {
            response.headers[.traceresponse] = traceparent
        }
        span.end()
        return response
    }

    /// A stage's span from `start` to `end`; no end: the refusal ended it, and it is marked an error.
    private static func stage(
        _ name: String, from start: IntakeStages.Instant, to end: IntakeStages.Instant?, refused: Refusal?, in parent: any Span
    ) {
        let span = startSpan(name, at: start, context: parent.context)
        if end == nil, let refused {
            span.attributes["rc_relay.problem"] = refused.kind.rawValue
            span.setStatus(SpanStatus(code: .error, message: refused.detail))
        }
        span.end(at: end ?? DefaultTracerClock.now)
    }
}

extension HTTPField.Name {
    static let traceparent = Self("traceparent")!
    static let tracestate = Self("tracestate")!
    static let traceresponse = Self("traceresponse")!
}
