"""Traces (`tracing.otlpEndpoint`), on the real binary: a real OTLP/HTTP receiver on loopback decodes what rc-relay
exports with PyPI's `opentelemetry-proto` (the collector's own message types), and the tests check the span tree of
a webhook that continues a sender's `traceparent` through a 503-then-200 delivery, a kept event whose replay after
kill -9 continues its trace, a Pub/Sub push that continues its publisher's `googclient_traceparent`, the catch-up
poll's own trace, and the bad days: a malformed `traceparent`, a collector that is down, `OTEL_*` values rc-relay
cannot honour. Waits are for the spans themselves."""
import gzip
import json
import os
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from conftest import BINARY, LINES, recorded, signed_headers, start_relay, stop_relay, until
from test_oidc import AUDIENCE, INVOKER, SAMPLES, keys, token  # noqa: F401 (the keys fixture)

ADMIN = "traces-admin-token-0123456789abcdef"
# Exported within 0.1 s of ending, not the default 5 s: the tests wait for spans, not for the batch timer.
FAST = {"OTEL_BSP_SCHEDULE_DELAY": "100"}


class Receiver:
    """An OTLP/HTTP collector on loopback: `POST /v1/traces`, protobuf in, protobuf out. Keeps every span once (an
    exporter may send a batch again after a flush), with its resource's attributes."""

    def __init__(self):
        self.spans = {}
        self.requests = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver.requests.append((self.path, self.headers.get("content-type")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with LINES:
                    for resource in request.resource_spans:
                        attributes = values(resource.resource.attributes)
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                receiver.spans[span.span_id.hex()] = (span, attributes)
                    LINES.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def named(self, name, trace=None):
        return [span for span, _ in self.spans.values() if span.name == name and (trace is None or span.trace_id.hex() == trace)]

    def children(self, parent):
        return [span for span, _ in self.spans.values() if span.parent_span_id == parent.span_id]

    def wait(self, predicate, what, timeout=60):
        assert until(predicate, timeout), f"{what}; spans received: " + ", ".join(sorted(s.name for s, _ in self.spans.values()))


def values(attributes):
    """OTLP key-values as a dict of plain Python values."""
    found = {}
    for item in attributes:
        kind = item.value.WhichOneof("value")
        found[item.key] = getattr(item.value, kind) if kind else None
    return found


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()


def publish(emulator, greeting):
    template = {"parameters": {"welcome": {"defaultValue": {"value": greeting}, "valueType": "STRING"}}}
    answer = requests.post(f"{emulator['url']}/emulator/remote-config/demo-project/publish", json=template, timeout=10)
    assert answer.ok, answer.text
    return int(answer.json()["versionNumber"])


def traced_relay(emulator, tmp_path, receiver_url, extra="", env=None):
    delivery = "" if "delivery:" in extra else "delivery: {answerWithinSeconds: 5, baseDelaySeconds: 0.2, maxDelaySeconds: 1}"
    return start_relay(emulator, tmp_path, f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN}"]}}
{delivery}
tracing: {{otlpEndpoint: "{receiver_url}"}}
{extra}
""", env={**FAST, **(env or {})})


def webhook(relay, version, headers=None):
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
    return requests.post(relay["webhook"], data=body, timeout=30,
                         headers={"content-type": "application/json", **signed_headers(body), **(headers or {})})


CHANGE_AWARE = """
delivery: {answerWithinSeconds: 5, baseDelaySeconds: 0.2, maxDelaySeconds: 1, spoolDirectory: "SPOOL"}
remoteConfig: {baseURL: "EMULATOR"}
poll: {intervalSeconds: 3600, graceSeconds: 0}
routes:
  - name: welcome
    topic: PUSH_RC
    when: {changed: {parameters: [welcome]}}
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
"""


def test_a_webhook_with_a_traceparent_makes_the_span_tree_through_a_retried_send(emulator, tmp_path, receiver):
    publish(emulator, "Hello")
    version = publish(emulator, "Hi")
    # A spool: the first 503 makes the answer a 202 (kept), and the retry goes on in the background, in the trace.
    config = CHANGE_AWARE.replace("EMULATOR", emulator["url"]).replace("SPOOL", str(tmp_path / "spool"))
    relay = traced_relay(emulator, tmp_path, receiver.url, config,
                         env={"OTEL_SERVICE_NAME": "rc-relay-eu", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test"})
    try:
        trace, caller = os.urandom(16).hex(), os.urandom(8).hex()
        requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "errorCode": "UNAVAILABLE"}, timeout=10).raise_for_status()
        answer = webhook(relay, version, {"traceparent": f"00-{trace}-{caller}-01", "tracestate": "vendor=1"})
        assert answer.status_code == 202, answer.text
        # The answer names the trace and the request's span (W3C Trace Context level 2's traceresponse).
        _, answered_trace, request_span_id, _ = answer.headers["traceresponse"].split("-")
        assert answered_trace == trace
        receiver.wait(lambda: len(receiver.named("FCM send", trace)) == 2 and receiver.named("POST /webhooks/remote-config", trace)
                      and receiver.named("deliver ping", trace), "the request, its ping and both FCM attempts")

        [request] = receiver.named("POST /webhooks/remote-config", trace)
        assert request.parent_span_id.hex() == caller and request.span_id.hex() == request_span_id
        assert request.kind == Span.SPAN_KIND_SERVER
        attributes = values(request.attributes)
        assert attributes["http.request.method"] == "POST" and attributes["http.response.status_code"] == 202
        assert attributes["url.path"] == "/webhooks/remote-config"
        assert attributes["rc_relay.request_id"] == answer.headers["x-request-id"]
        resource = receiver.spans[request.span_id.hex()][1]
        assert resource["service.name"] == "rc-relay-eu" and resource["deployment.environment"] == "test"

        stages = {span.name: span for span in receiver.children(request)}
        assert {"verify", "decode", "admit", "plan", "deliver ping"} <= set(stages), sorted(stages)
        # Verify, then decode, then admission, then the plan: in that order, inside the request.
        order = [stages[name] for name in ("verify", "decode", "admit", "plan")]
        assert all(a.end_time_unix_nano <= b.start_time_unix_nano for a, b in zip(order, order[1:]))
        assert request.start_time_unix_nano <= stages["verify"].start_time_unix_nano
        assert stages["plan"].end_time_unix_nano <= request.end_time_unix_nano
        assert values(stages["admit"].attributes)["rc_relay.admission"] == "deliver here"
        assert values(stages["plan"].attributes)["rc_relay.change"] == "known"

        # The change-aware route fetched the version and the one before it: two Remote Config calls under the plan.
        fetches = [span for span in receiver.children(stages["plan"]) if span.name == "Remote Config get"]
        assert len(fetches) == 2 and all(values(s.attributes)["http.response.status_code"] == 200 for s in fetches)

        ping = stages["deliver ping"]
        ping_attributes = values(ping.attributes)
        assert ping_attributes["rc_relay.route"] == "welcome" and ping_attributes["rc_relay.status"] == "accepted"
        assert ping_attributes["messaging.destination.name"] == "PUSH_RC" and ping_attributes["rc_relay.attempts"] == 2
        first, second = sorted((s for s in receiver.children(ping) if s.name == "FCM send"), key=lambda s: s.start_time_unix_nano)
        assert first.kind == Span.SPAN_KIND_CLIENT and second.kind == Span.SPAN_KIND_CLIENT
        failed, accepted = values(first.attributes), values(second.attributes)
        assert failed["http.response.status_code"] == 503 and failed["rc_relay.fcm.error_code"] == "UNAVAILABLE"
        assert failed["rc_relay.outcome"] == "retry" and 0 < failed["rc_relay.retry_in_seconds"] <= 1
        assert first.status.code == Status.STATUS_CODE_ERROR
        assert accepted["http.response.status_code"] == 200 and accepted["rc_relay.attempt"] == 2
        assert first.end_time_unix_nano <= second.start_time_unix_nano
        # The HTTP client's own request spans hang under the attempt that made them.
        assert all(child.kind == Span.SPAN_KIND_CLIENT for child in receiver.children(second))
        assert receiver.children(second), "the HTTP client's span of the accepted request"

        # From a ping to its trace: the delivery history and the log lines say it.
        deliveries = requests.get(relay["url"] + "/admin/deliveries", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).json()
        assert [d["traceId"] for d in deliveries["deliveries"]] == [trace]
        console = requests.Session()
        assert console.post(relay["url"] + "/console/sign-in", data={"token": ADMIN}, timeout=10).ok
        page = console.get(relay["url"] + "/console/deliveries/" + deliveries["deliveries"][0]["id"], timeout=10).text
        assert f'<dt>Trace</dt><dd><code class="trace-id">{trace}</code></dd>' in page
        # The access line is written as the answer leaves: it may reach the pipe after the answer reaches the test.
        def traced():
            lines = [json.loads(line) for line in list(relay["proc"].lines) if line.startswith("{")]
            return {line["msg"] for line in lines if line.get("trace_id") == trace}

        assert until(lambda: {"request", "ping accepted by FCM", "ping will be retried"} <= traced(), 30), traced()
        assert receiver.requests and all(path == "/v1/traces" and kind == "application/x-protobuf" for path, kind in receiver.requests)

        # The catch-up poll is a trace of its own, with its Remote Config call.
        receiver.wait(lambda: receiver.named("catch-up poll"), "the first poll's span")
        [poll] = receiver.named("catch-up poll")
        assert poll.trace_id.hex() != trace and not poll.parent_span_id
        assert [span.name for span in receiver.children(poll)] == ["Remote Config listVersions"]
    finally:
        stop_relay(relay)


def test_a_kept_event_replayed_after_kill_9_continues_its_trace(emulator, tmp_path, receiver):
    """The spool keeps the event's traceparent: the restarted relay's `replay kept event` span is a child of the
    request that was answered 202, in the same trace, and the pings it sends hang under it."""
    spool = tmp_path / "spool"
    kept = f'delivery: {{answerWithinSeconds: 0.3, spoolDirectory: "{spool}", maxAttempts: 20, maxDelaySeconds: 0.5}}'
    requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "count": 1000}, timeout=10).raise_for_status()
    relay = traced_relay(emulator, tmp_path, receiver.url, kept)
    trace = os.urandom(16).hex()
    try:
        answer = webhook(relay, 31, {"traceparent": f"00-{trace}-{os.urandom(8).hex()}-01"})
        assert answer.status_code == 202, answer.text
        _, _, request_span_id, _ = answer.headers["traceresponse"].split("-")
        assert len(list(spool.glob("*.json"))) == 1
        # The spans of the first process are exported before it dies: the request's is what the replay continues.
        receiver.wait(lambda: receiver.named("POST /webhooks/remote-config", trace), "the request's span")
    finally:
        relay["proc"].proc.send_signal(signal.SIGKILL)
        relay["proc"].proc.wait(timeout=10)
    requests.delete(emulator["url"] + "/emulator/messages", timeout=10).raise_for_status()  # FCM is back
    restarted = traced_relay(emulator, tmp_path, receiver.url, kept)
    try:
        # The replayed ping's span ends last: after its accepted send, and after the replay's, which does not wait for it.
        def replayed():
            return [s for replay in receiver.named("replay kept event", trace) for s in receiver.children(replay) if s.name == "deliver ping"]

        receiver.wait(replayed, "the replayed ping under the replay, in the first request's trace")
        assert any(values(s.attributes).get("http.response.status_code") == 200 for s in receiver.named("FCM send", trace))
        [replay] = receiver.named("replay kept event", trace)
        assert replay.parent_span_id.hex() == request_span_id
        assert values(replay.attributes)["rc_relay.version"] == 31
        [ping] = replayed()
        assert values(ping.attributes)["rc_relay.status"] == "accepted"
        assert [m["message"]["data"]["CONFIG_VERSION"] for m in recorded(emulator)] == ["31"]
        assert restarted["proc"].saw('"trace_id":"' + trace + '"')
    finally:
        stop_relay(restarted)


def test_a_pubsub_push_continues_its_publishers_trace(emulator, tmp_path, receiver, keys):  # noqa: F811
    relay = start_relay(emulator, tmp_path, f"""
webhook: {{auth: oidc}}
oidc: {{audiences: ["{AUDIENCE}"], allowedEmails: ["{INVOKER}"], jwksURL: "{keys.url}"}}
tracing: {{otlpEndpoint: "{receiver.url}/"}}
""", env=FAST)
    try:
        envelope = json.loads((SAMPLES / "pubsub-push.json").read_text())
        trace, publisher = os.urandom(16).hex(), os.urandom(8).hex()
        envelope["message"].setdefault("attributes", {})["googclient_traceparent"] = f"00-{trace}-{publisher}-01"
        # The push request itself carries another trace (a proxy's, say): the publisher's is the parent, this a link.
        other = os.urandom(16).hex()
        answer = requests.post(relay["url"] + "/pubsub/remote-config", data=json.dumps(envelope), timeout=30, headers={
            "content-type": "application/json", "authorization": f"Bearer {token(keys)}",
            "traceparent": f"00-{other}-{os.urandom(8).hex()}-01"})
        assert answer.status_code == 200, answer.text
        assert answer.headers["traceresponse"].split("-")[1] == trace
        # The request's span ends last (after its stages and its ping): once it is in, they are.
        receiver.wait(lambda: receiver.named("FCM send", trace) and receiver.named("POST /pubsub/remote-config", trace),
                      "the push's FCM send and its request, in the publisher's trace")
        [request] = receiver.named("POST /pubsub/remote-config", trace)
        assert request.parent_span_id.hex() == publisher
        assert [link.trace_id.hex() for link in request.links] == [other]
        assert {"verify", "decode", "admit", "plan", "deliver ping"} <= {span.name for span in receiver.children(request)}
    finally:
        stop_relay(relay)


def test_a_malformed_traceparent_starts_a_new_trace_and_only_verified_senders_are_traced(emulator, tmp_path, receiver):
    """Issue #48: trace context is read as W3C Trace Context says, and only once the sender is verified. A request
    refused before that has no span and no traceresponse, however well formed its traceparent; a verified request
    refused later (its body does not decode) is traced, its `decode` span an error."""
    relay = traced_relay(emulator, tmp_path, receiver.url)
    try:
        answer = webhook(relay, 7, {"traceparent": "00-not-a-trace-01"})
        assert answer.status_code == 200, answer.text
        for malformed in (f"00-{'0' * 32}-{'1' * 16}-01", f"ff-{'a' * 32}-{'1' * 16}-01", f"00-{'A' * 32}-{'1' * 16}-01", "00-" + "a" * 5000,
                          f"00-{'a' * 32}-{'1' * 16}-01-extra", f"01-{'a' * 32}-{'1' * 16}-01x"):
            assert webhook(relay, 7, {"traceparent": malformed}).headers["traceresponse"].split("-")[1] != malformed.split("-")[1]
        fresh = answer.headers["traceresponse"].split("-")[1]
        receiver.wait(lambda: receiver.named("POST /webhooks/remote-config", fresh), "the request's span")
        [request] = receiver.named("POST /webhooks/remote-config", fresh)
        assert not request.parent_span_id
        # A later version is read by its first 55 characters; a tracestate that is not well formed is dropped alone.
        later, caller = os.urandom(16).hex(), os.urandom(8).hex()
        continued = webhook(relay, 7, {"traceparent": f"01-{later}-{caller}-01-what-a-later-version-adds", "tracestate": "x" * 8192})
        assert continued.headers["traceresponse"].split("-")[1] == later
        receiver.wait(lambda: receiver.named("POST /webhooks/remote-config", later), "the later version's request span")
        [request] = receiver.named("POST /webhooks/remote-config", later)
        assert request.parent_span_id.hex() == caller and request.trace_state == ""
        # A forged signature with a well-formed traceparent: refused before the sender is known, so not traced at all.
        forged_trace = os.urandom(16).hex()
        body = b'{"versionNumber": "8"}'
        forged = requests.post(relay["webhook"], data=body, timeout=30, headers={
            "content-type": "application/json", "traceparent": f"00-{forged_trace}-{os.urandom(8).hex()}-01",
            **signed_headers(body, secret="whsec_" + "A" * 43 + "=")})
        assert forged.status_code == 401
        assert "traceresponse" not in forged.headers
        # A verified sender whose body does not decode: traced, refused in `decode`, which says why.
        bad = b'{"versionNumber": "not a number"}'
        refused = requests.post(relay["webhook"], data=bad, timeout=30, headers={"content-type": "application/json", **signed_headers(bad)})
        assert 400 <= refused.status_code < 500, refused.text
        refused_trace = refused.headers["traceresponse"].split("-")[1]
        # The request's span ends after its stages: wait for it. Spans are exported in the order they end, so the forged
        # request's, had there been one, would have arrived by then.
        receiver.wait(lambda: receiver.named("decode", refused_trace) and receiver.named("POST /webhooks/remote-config", refused_trace),
                      "the refused request's span and its decode span")
        [decode] = receiver.named("decode", refused_trace)
        assert decode.status.code == Status.STATUS_CODE_ERROR
        assert values(decode.attributes)["rc_relay.problem"] == "malformed-event"
        [request] = receiver.named("POST /webhooks/remote-config", refused_trace)
        assert sorted(span.name for span in receiver.children(request)) == ["decode", "verify"]
        assert not [span for span, _ in receiver.spans.values() if span.trace_id.hex() == forged_trace]
        assert len(recorded(emulator)) == 1
        # Malformed trace context is not worth a log line each: any caller could flood the log with them.
        assert "extract" not in relay["proc"].output
    finally:
        stop_relay(relay)


def test_a_collector_that_is_down_costs_no_webhook(emulator, tmp_path):
    relay = traced_relay(emulator, tmp_path, "http://127.0.0.1:9")
    try:
        for version in (1, 2, 3):
            assert webhook(relay, version).status_code == 200
        assert len(recorded(emulator)) == 3
        # swift-otel says the export failed, in rc-relay's log.
        # swift-otel says the export failed (after its own retries), in rc-relay's log.
        relay["proc"].wait_for(lambda line: "Failed to export batch" in line, timeout=120)
    finally:
        stop_relay(relay)


def test_otel_sdk_disabled_turns_tracing_off_whatever_the_file_says(emulator, tmp_path, receiver):
    relay = traced_relay(emulator, tmp_path, receiver.url, env={"OTEL_SDK_DISABLED": "true"})
    try:
        answer = webhook(relay, 4)
        assert answer.status_code == 200 and "traceresponse" not in answer.headers
        assert "tracing is off: OTEL_SDK_DISABLED is true" in relay["proc"].output  # said before it listened
    finally:
        stop_relay(relay)
    assert not receiver.spans


def test_the_sampler_variable_applies_a_senders_decision_first(emulator, tmp_path, receiver):
    # parentbased_always_off: a request without a sampled parent is not recorded; one whose sender sampled it is.
    relay = traced_relay(emulator, tmp_path, receiver.url, env={"OTEL_TRACES_SAMPLER": "parentbased_always_off"})
    try:
        unsampled = webhook(relay, 11)
        assert unsampled.status_code == 200
        unsampled_trace = unsampled.headers["traceresponse"].split("-")[1]
        assert unsampled.headers["traceresponse"].endswith("-00")  # not sampled, and the answer says so
        sampled_trace = os.urandom(16).hex()
        assert webhook(relay, 12, {"traceparent": f"00-{sampled_trace}-{os.urandom(8).hex()}-01"}).status_code == 200
        # Spans leave in the order they end: once the second request's are in, the first's would be too.
        receiver.wait(lambda: receiver.named("POST /webhooks/remote-config", sampled_trace), "the sampled request's span")
        assert not [span for span, _ in receiver.spans.values() if span.trace_id.hex() == unsampled_trace]
    finally:
        stop_relay(relay)


def test_tracing_off_adds_nothing(relay):
    answer = webhook(relay, 5, {"traceparent": f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-01"})
    assert answer.status_code == 200
    assert "traceresponse" not in answer.headers
    # The request's access line is written as its answer leaves: once it is read, so is every line before it.
    relay["proc"].wait_for(lambda line: '"msg":"request"' in line and answer.headers["x-request-id"] in line)
    assert "trace_id" not in relay["proc"].output


@pytest.mark.parametrize("variable,value", [
    ("OTEL_PROPAGATORS", "tracecontext,baggage"),
    ("OTEL_TRACES_SAMPLER", "jaeger_remote"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ("OTEL_TRACES_EXPORTER", "zipkin"),
])
def test_otel_values_rc_relay_cannot_honour_are_configuration_errors(tmp_path, variable, value):
    config = tmp_path / "rc-relay.yaml"
    config.write_text('webhook: {secrets: ["whsec_' + "A" * 43 + '="]}\nfcm: {project: demo-project}\ntracing: {otlpEndpoint: "http://127.0.0.1:4318"}\n')
    done = subprocess.run([BINARY, "check-config", str(config)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, variable: value})
    assert done.returncode == 78, done.stdout + done.stderr
    assert f"configuration error at '{variable}'" in done.stderr and value.split(",")[-1] in done.stderr
