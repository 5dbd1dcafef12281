"""A hostile-header campaign against the real binary (issue #48): seeded, bounded requests to every kind of endpoint
(webhook and Pub/Sub intake, the admin API, the operator's page and its sign-in, the probes, /metrics, unknown and
very long paths) whose headers are huge, repeated, malformed, full of control characters or shaped like a forged log
line, sent over raw sockets so that nothing is cleaned up on the way. Nearly every request is refused (unsigned or
badly signed); a few are signed, with hostile trace context. The requests that put the most of a sender's text into
the log (a cross-origin sign-in's Origin and Host, a 30 KB path of backslashes, a request id of 128 of them) go first.

For text and JSON logs, with tracing on and off, the relay's stdout must show that

- no answer is a 5xx (an HTTP parser that refuses a request with 400 or closes the connection is counted, and fine);
- every line is one record: a JSON object in `json`, a line that starts with the timestamp and a level in `text`;
  no raw control character, U+2028 or U+2029 on any line; no value longer than 1,024 bytes of escaped text before its
  `…[N bytes cut]` marker, no key longer than 128 bytes;
- a refused request costs at most two lines (its access line and one refusal line) and 4,096 bytes of log; the
  median and maximum are printed (`pytest -s`);
- with tracing on, a request refused before its sender is verified has no `traceresponse` and no span, and malformed
  trace context is dropped without a word (no `Failed to extract span context`), while a signed request's valid
  `traceparent` is continued;
- at the end, a signed webhook with a `traceparent` is still relayed (and, traced, answered with its trace), and the
  right admin token is accepted after wrong ones from the same client, within the throttle's 8 s, as a bearer token
  and as a sign-in. Wrong tokens in the campaign come each from a client of its own, so it never waits on them.

Each configuration runs cases from a fixed seed (the same every run) and from a new one (printed with any failure,
to reproduce it). RC_RELAY_HOSTILE_CASES sets the cases per seed."""
import base64
import json
import os
import random
import re
import socket
import statistics
import subprocess
import threading
import time
import unicodedata

import pytest

from conftest import BINARY, LINES, ROOT, SECRET, signed_headers, stop_relay, until
from test_traces import receiver  # noqa: F401 (the OTLP receiver fixture)

SAMPLES = ROOT / "Tests" / "Fixtures" / "samples"
BODIES = [b"", b"{}", b"x", b"token=",
          *((SAMPLES / name).read_bytes() for name in ("template-version.json", "cloudevent-structured.json", "pubsub-push.json"))]
CASES = int(os.environ.get("RC_RELAY_HOSTILE_CASES", "75"))
SEEDS = [20261129, random.randrange(1, 2**31)]
ADMIN = "hostile-admin-token-" + os.urandom(12).hex()
WRONG_SECRET = "whsec_" + "A" * 43 + "="
# Exported within 0.1 s of ending, as in test_traces.py: the end of the run waits for spans, not for the batch timer.
FAST = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
REFUSAL_LINES, REFUSAL_BYTES = 2, 4096
VALUE_BYTES, KEY_BYTES = 1024, 128

FORGED_TEXT = "x\n2026-11-29T00:00:00+0000 critical rc-relay: forged"
FORGED_JSON = '"}\n{"level":"critical","msg":"forged"'
# What the log must escape: every C0 and C1 control character, the Unicode line separators, a backslash, a quote.
CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)])) + "\u2028\u2029\\\""
# What an HTTP/1.1 parser lets through in a header value: tab, and anything from 0x80 up (obs-text).
PASSING = "\t\u2028\u2029\u0085\u0080\u009f\\\"'{}"
TEXT_START = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (trace|debug|info|notice|warning|error|critical) ")
CUT = re.compile(r"…\[(\d+) bytes cut\]$")
ESCAPED = re.compile(rb"\\u(00[0-9a-f]{2}|202[89])|\\t|\\\\")
RAW_CONTROL = re.compile("[\u0000-\u001f\u007f-\u009f\u2028\u2029]")
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")

# Text logs behind a trusted proxy (X-Forwarded-* read), JSON logs without one; each with tracing on and off, so that
# what a refused request costs can be compared with tracing off.
CONFIGURATIONS = [
    pytest.param("text", True, True, id="text-traced-behind-proxy"),
    pytest.param("text", False, True, id="text-untraced-behind-proxy"),
    pytest.param("json", True, False, id="json-traced"),
    pytest.param("json", False, False, id="json-untraced"),
]


class LogProcess:
    """`rc-relay serve` with its stdout kept as bytes, one entry per line: a request's log is counted in bytes, and a
    line that is not UTF-8 is itself a finding. Has what stop_relay needs (`stop`, `output`)."""

    def __init__(self, args, env):
        self.lines = []
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, **env})
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            with LINES:
                self.lines.append(line)
                LINES.notify_all()

    def wait_for(self, needle, start=0, timeout=30):
        """The index of the first line from `start` on that holds `needle`."""
        found = []

        def seen():
            found.extend(i for i in range(start, len(self.lines)) if needle in self.lines[i])
            return bool(found) or self.proc.poll() is not None

        assert until(seen, timeout) and found, f"no log line holds {needle!r}:\n" + self.output[-5000:]
        return found[0]

    @property
    def output(self):
        if self.proc.poll() is not None:
            self._pump_thread.join(timeout=30)
        return b"".join(self.lines).decode("utf-8", "replace")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start(emulator, tmp_path, log_format, receiver=None, behind_proxy=False):
    """`rc-relay serve` as conftest.start_relay runs it, with this campaign's log format (at info), a webhook secret,
    admin tokens (so /admin and /console exist), optionally 127.0.0.1 as a trusted proxy, and tracing to `receiver`."""
    server = '{port: 0, trustedProxies: ["127.0.0.1"]}' if behind_proxy else "{port: 0}"
    tracing = f'tracing: {{otlpEndpoint: "{receiver.url}"}}' if receiver else ""
    config = tmp_path / "rc-relay.yaml"
    config.write_text(f"""
server: {server}
fcm: {{credentialsFile: "{emulator['key_file']}", baseURL: "{emulator['url']}"}}
log: {{format: {log_format}, level: info}}
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN}"]}}
{tracing}
""")
    proc = LogProcess([BINARY, "serve", "--config", str(config)], env={"TEST_WEBHOOK_SECRET": SECRET, **FAST})
    line = proc.lines[proc.wait_for(b"rc-relay listening")].decode()
    address = json.loads(line)["address"] if log_format == "json" else re.search(r" address=(\S+)", line).group(1)
    return {"url": f"http://{address}", "port": int(address.rsplit(":", 1)[1]), "proc": proc, "emulator": emulator}


class Answer:
    """An HTTP/1.1 answer read off a raw socket; `status` None: the connection closed without one."""

    def __init__(self, data):
        self.status, self.headers = None, {}
        if not data:
            return
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        match = re.match(r"HTTP/1\.[01] (\d{3}) ", head[0] + " ")
        assert match, f"not an HTTP answer: {data[:300]!r}"
        self.status = int(match.group(1))
        for line in head[1:]:
            name, _, value = line.partition(":")
            self.headers.setdefault(name.strip().lower(), []).append(value.strip())

    def header(self, name):
        return (self.headers.get(name) or [None])[-1]


def exchange(port, method, target, headers, body=b"", source="127.0.0.1"):
    """One request on its own connection, exactly as given (headers as (name, bytes) pairs, in order, repeats kept), then
    the write side shut so that a wrong Content-Length cannot keep the server waiting; the answer, read to the end."""
    names = {name.lower() for name, _ in headers}
    lines = [method.encode() + b" " + target + b" HTTP/1.1"]
    if "host" not in names:
        lines.append(f"Host: 127.0.0.1:{port}".encode())
    lines += [name.encode() + b": " + value for name, value in headers]
    if "content-length" not in names and (body or method == "POST"):
        lines.append(b"Content-Length: %d" % len(body))
    lines.append(b"Connection: close")
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0)) as connection:
        try:
            connection.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
            connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server stopped reading (a header too large): what it answered is still read below
        try:
            while chunk := connection.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    return Answer(data)


# Hostile values. Each takes the random generator and returns text (sent as UTF-8, sometimes as Latin-1) or bytes.


def encoded(value):
    return value if isinstance(value, bytes) else value.encode()


def hex_digits(rng, count):
    return "".join(rng.choice("0123456789abcdef") for _ in range(count))


def passing(text, rng):
    """`text` with what an HTTP parser refuses in a header value (C0 controls but tab, DEL) replaced by a character that
    passes and that the log must still escape."""
    return "".join(rng.choice(PASSING) if (ord(c) < 0x20 and c != "\t") or c == "\x7f" else c for c in text)


def huge(rng):
    unit = rng.choice(["a", "\\", "\u2028", "é", "🏻", '"', "\t", "\u0085", passing(FORGED_JSON, rng)])
    return unit * (rng.choice([1025, 1100, 4096, 20000, 60 * 1024]) // len(unit.encode()) + 1)


def generic(rng):
    return rng.choice([
        lambda: passing(FORGED_TEXT, rng), lambda: passing(FORGED_JSON, rng), lambda: passing(CONTROLS, rng), lambda: huge(rng),
        lambda: "", lambda: "   ", lambda: b"\xff\xfe\x80\xc0", lambda: "\\n2026-11-29T00:00:00+0000 critical rc-relay: forged",
    ])()


def traceparent(rng):
    """A traceparent and the trace a relay that honours it continues (None: it must not)."""
    trace, span = hex_digits(rng, 32), hex_digits(rng, 16)
    return rng.choice([
        (f"00-{trace}-{span}-01", trace), (f"00-{trace}-{span}-00", trace),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"),
        (f"01-{trace}-{span}-01-what-a-later-version-adds", trace),
        (f"ff-{trace}-{span}-01", None), (f"00-{'0' * 32}-{span}-01", None), (f"00-{trace.upper()}-{span}-01", None),
        (f"00-{trace}-{'0' * 16}-01", None), (f"00-{trace}-{span}-01-extra", None), ("00-not-a-trace-01", None),
        (f"00-{trace}-{span}-01" + passing(FORGED_TEXT, rng), None), ("00-" + "a" * 60000, None), (generic(rng), None),
    ])


def tracestate(rng):
    return rng.choice([
        "x" * 8192, ",".join(f"k{i}=v{i}" for i in range(33)), "vendor=1", "=,=,,", "a=" + "b" * 300, passing(FORGED_JSON, rng),
        "rojo=00f067aa0ba902b7," * 2000, generic(rng),
    ])


def values_for(name, rng, port, body):
    """A hostile value for header `name`."""
    now = int(time.time())
    specific = {
        "webhook-id": lambda: rng.choice(["msg_" + hex_digits(rng, 16), "msg_" + passing(FORGED_TEXT, rng), "a" * 300]),
        "webhook-timestamp": lambda: rng.choice([str(now), "0", "-1", "99999999999999999999", "1e9", f" {now}", f"{now}.5"]),
        "webhook-signature": lambda: rng.choice([
            "v1," + base64.b64encode(rng.randbytes(32)).decode(), "v1,garbage", " ".join(["v1,AAAA"] * 200), "v2,xyz",
            "v1," + "A" * 60000, "v1a,", ","]),
        "ce-specversion": lambda: rng.choice(["1.0", "0.3", "1.0" + passing(FORGED_TEXT, rng)]),
        "ce-type": lambda: rng.choice(["google.firebase.remoteconfig.remoteConfig.v1.updated", "other"]),
        "ce-source": lambda: rng.choice(["//firebaseremoteconfig.googleapis.com/projects/demo-project", "//x/" + passing(CONTROLS, rng)]),
        "ce-id": lambda: rng.choice(["ev-1", "ev-" + "é" * 400]),
        "traceparent": lambda: traceparent(rng)[0],
        "tracestate": lambda: tracestate(rng),
        "X-Forwarded-For": lambda: rng.choice([
            "203.0.113.9", "203.0.113.9, 127.0.0.1", "::1", "[2001:db8::1]:443", "unknown", "1.2.3.4, " * 3000, "10.0.0.1\t",
            "999.1.1.1", "::ffff:10.1.2.3", "127.0.0.1, 127.0.0.1", passing(FORGED_TEXT, rng) + ", 198.51.100.7"]),
        "X-Forwarded-Host": lambda: rng.choice(["evil.example", f"127.0.0.1:{port}", "a, b, c", f"evil.example, 127.0.0.1:{port}"]),
        "X-Forwarded-Proto": lambda: rng.choice(["https", "http", "javascript", "HTTPS, http"]),
        "X-Request-Id": lambda: rng.choice([
            '"}{"level":"critical","msg":"forged"}', "\\" * 128, "a" * 128, "a" * 129, "req-" + hex_digits(rng, 8), "\\u2028\\n"]),
        "Content-Type": lambda: rng.choice([
            "application/json", 'application/cloudevents+json; charset="x"', "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=" + "-" * 5000, "text/plain; charset=" + passing(CONTROLS, rng)]),
        "Content-Length": lambda: rng.choice([
            str(len(body) + rng.randint(1, 50)), str(max(0, len(body) - 1)), "99999999999999999999999", "-1", "abc", "1e3",
            f" {len(body)} ", "0x10", "", f"{len(body)}, {len(body) + 1}"]),
        "Authorization": lambda: rng.choice([
            "Bearer " + hex_digits(rng, 40), "Bearer " + "A" * 60000, "Bearer " + passing(CONTROLS, rng), "Bearer", "Bearer ",
            "Basic dXNlcjpwYXNz", "bearer " + ADMIN[:-1], "Bearer " + passing(FORGED_JSON, rng)]),
        "Origin": lambda: rng.choice([
            f"http://127.0.0.1:{port}", "null", "http://evil.example", "http://[::1", "javascript:alert(1)"]),
        "Cookie": lambda: rng.choice([
            "rc_relay_session=" + hex_digits(rng, 40), "; ".join(f"c{i}=v" for i in range(2000)), "rc_relay_session=" + passing(FORGED_TEXT, rng),
            "=;=;;"]),
        "Host": lambda: rng.choice([passing(FORGED_TEXT, rng), "h" * 5000, f"127.0.0.1:{port}"]),
    }
    value = specific[name]() if rng.random() < 0.6 else generic(rng)
    if isinstance(value, bytes):
        return value
    if rng.random() < 0.2 and all(ord(c) < 256 for c in value):
        return value.encode("latin-1")  # C1 controls as single bytes
    return value.encode()


HEADERS = ["webhook-id", "webhook-timestamp", "webhook-signature", "ce-id", "ce-source", "ce-specversion", "ce-type", "traceparent",
           "tracestate", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id", "Content-Type", "Content-Length",
           "Authorization", "Origin", "Cookie", "Host"]
# Headers a signed request can carry without making its signature fail: it stays verified, so it is traced.
AFTER_VERIFICATION = ["ce-id", "ce-source", "ce-specversion", "ce-type", "tracestate", "X-Forwarded-For", "X-Forwarded-Host",
                      "X-Forwarded-Proto", "X-Request-Id", "Origin", "Cookie"]
ENDPOINTS = [("POST", "/webhooks/remote-config", 8), ("POST", "/pubsub/remote-config", 3), ("GET", "/admin/info", 1), ("POST", "/admin/info", 1),
             ("GET", "/admin/deliveries", 1), ("POST", "/admin/send", 1), ("GET", "/console", 1), ("POST", "/console/sign-in", 3),
             ("GET", "/healthz", 1), ("GET", "/readyz", 1), ("GET", "/metrics", 1), ("GET", "/no/such/path", 1), ("POST", "LONG", 2)]
LONG_PATHS = ["/" + "a" * 2000, "/x/" + "%E2%80%A8" * 3000, "/x%0A2026-11-29T00:00:00+0000%20critical%20rc-relay:%20forged",
              "/%22%7D%0A%7B%22level%22:%22critical%22", "//admin/../" + "b" * 60000, "/webhooks/remote-config/" + "%00" * 500]


# Request ids the relay takes (up to 128 visible ASCII characters) and logs: they must come out escaped.
LOGGED_IDS = ['"}{"level":"critical","msg":"forged"}', '\\"}\\n{"level":"critical"}', "\\" * 128, "x\\u2028y", "x\\n2026-11-29T00:00:00+0000"]


class Case:
    """One request of the campaign, and what it should come to."""

    def __init__(self, method, path, headers, body, source="127.0.0.1", signed=False, continues=None, traces=(), id_refused=False):
        self.method, self.path, self.headers, self.body, self.source = method, path, headers, body, source
        # Signed: its sender is verified, so it is traced; `continues`: the trace its answer must name (tracing on).
        self.signed, self.continues, self.traces = signed, continues, set(traces)
        # Signed, but with a webhook-id the relay refuses once the signature is checked (a control character, more than
        # 256 characters): its sender is verified, so it is traced like any other signed request.
        self.id_refused = id_refused

    def describe(self):
        headers = ", ".join(f"{name}: {value[:60]!r}{f' ({len(value)} bytes)' if len(value) > 60 else ''}" for name, value in self.headers)
        return f"{self.method} {self.path[:80]!r} from {self.source} [{headers}] body {self.body[:40]!r}"


def make_case(rng, index, port, behind_proxy, version):
    """A hostile request: mostly unsigned or badly signed to any endpoint; sometimes a signed webhook with hostile trace
    context and headers read only after verification."""
    if rng.random() < 0.12:
        return signed_case(rng, port, version)
    method, path, _ = rng.choices(ENDPOINTS, weights=[weight for *_, weight in ENDPOINTS])[0]
    path = rng.choice(LONG_PATHS) if path == "LONG" else path
    body = rng.choice(BODIES) if method == "POST" else b""
    if path == "/console/sign-in":
        body = rng.choice([b"token=" + hex_digits(rng, 30).encode(), b"token=%0A" + FORGED_TEXT.encode().replace(b"\n", b"%0A"), b""])
    headers = []
    if path.endswith("/remote-config") and rng.random() < 0.5:
        headers += [(name, value.encode()) for name, value in signed_headers(body, secret=WRONG_SECRET).items()]
    for name in rng.sample(HEADERS, rng.randint(1, 5)):
        copies = rng.choice([2, 3, 5]) if rng.random() < 0.25 else 1
        value = values_for(name, rng, port, body)
        headers += [(name, value if rng.random() < 0.5 else values_for(name, rng, port, body)) for _ in range(copies)]
    if rng.random() < 0.25:
        headers.append(("X-Request-Id", rng.choice(LOGGED_IDS).encode()))
    if path == "/console/sign-in" and rng.random() < 0.7:
        # A sign-in from another origin is logged with its Origin and Host: hostile ones must come out escaped and cut.
        headers.append(("Origin", encoded(rng.choice([generic(rng), "http://evil.example/" + passing(FORGED_TEXT, rng), "http://" + huge(rng)]))))
        if rng.random() < 0.3:
            headers.append(("Host", encoded(rng.choice([generic(rng), passing(FORGED_JSON, rng)]))))
    if rng.random() < 0.08:
        # Raw control characters, bare CR or LF, a forged line: the server's parser refuses these (400 or a closed
        # connection); whatever gets through must still be escaped.
        name = rng.choice(HEADERS[:-1])
        raw = rng.choice([FORGED_TEXT, FORGED_JSON, CONTROLS, "a\rforged", "a\nforged: 1", "\x00", "\x7f"])
        headers.append((name, raw.encode()))
    traces = {m.group(1) for name, value in headers if name == "traceparent" and (m := TRACEPARENT.match(value.decode("latin-1")))}
    source = "127.0.0.1"
    first = path.lstrip("/").split("/")[0]
    if first == "admin" or (first == "console" and method == "POST"):
        # A wrong admin token slows its client's next one: each such case comes from a client of its own, a loopback
        # address of its own or (behind the proxy) an X-Forwarded-For entry of its own, so the campaign never waits.
        if behind_proxy and rng.random() < 0.4:
            headers.append(("X-Forwarded-For", f"198.51.{index // 250}.{index % 250 + 1}".encode()))
        else:
            source = f"127.{1 + index // 250}.{index % 250 + 1}.9"
    return Case(method, path, headers, body, source=source, traces=traces)


def largest_cases():
    """The requests that put the most of what a sender chose into the log, sent first in every configuration: each
    logged value as long as it is kept, and escaped to twice or six times its size (a backslash, U+2028), with a
    request id of 128 backslashes on both lines. They must reach the relay (headers under its parser's limit)."""
    wide_id = ("X-Request-Id", b"\\" * 128)
    return [
        # A sign-in from another origin logs its Origin and its Host.
        Case("POST", "/console/sign-in", [("Origin", ("http://" + "\u2028" * 6000).encode()), ("Host", b"\\" * 6000), wide_id],
             b"token=x", source="127.253.0.1"),
        # A refused admin request logs its path, on both lines.
        Case("GET", "//admin/" + "\\" * 30000, [("Authorization", ("Bearer " + passing(CONTROLS, random.Random(0))).encode()), wide_id], b"",
             source="127.253.0.2"),
        Case("GET", "/" + "\\" * 30000, [wide_id, ("Cookie", b"rc_relay_session=" + b"\\" * 30000)], b""),
        Case("POST", "/webhooks/remote-config/" + "\\" * 20000, [wide_id], b"{}"),
        Case("POST", "/webhooks/remote-config", [
            ("webhook-id", ("msg_" + "\u2028" * 1000).encode()), ("webhook-timestamp", passing(FORGED_TEXT, random.Random(1)).encode()),
            ("webhook-signature", b"v1," + b"A" * 30000), ("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            ("tracestate", b"x" * 8192), wide_id], b"{}", traces={"4bf92f3577b34da6a3ce929d0e0e4736"}),
        Case("POST", "/pubsub/remote-config", [("Authorization", b"Bearer " + b"A" * 60000), wide_id], b"{}"),
    ]


def signed_case(rng, port, version):
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
    # Sometimes an id of its own, signed: read after verification, refused if it holds a control character or is too long.
    msg_id = rng.choice([None, None, None, "msg_\t2026-11-29T00:00:00+0000 critical rc-relay: forged", 'msg_"}{"level":"critical"}',
                         "msg_" + "\\" * 300, "msg_" + "\u2028\u0085" * 100, "msg_" + hex_digits(rng, 8) + "\u00e9"])
    headers = [(name, value.encode()) for name, value in {"content-type": "application/json", **signed_headers(body, msg_id)}.items()]
    continues = None
    if rng.random() < 0.85:
        value, continues = traceparent(rng)
        headers.append(("traceparent", encoded(value)))
        if rng.random() < 0.15:
            headers.append(("traceparent", encoded(traceparent(rng)[0])))  # two: not one context to continue
            continues = None
    for name in rng.sample(AFTER_VERIFICATION, rng.randint(0, 4)):
        headers.append((name, values_for(name, rng, port, body)))
    id_refused = msg_id is not None and (len(msg_id) > 256 or any(unicodedata.category(c) == "Cc" for c in msg_id))
    return Case("POST", "/webhooks/remote-config", headers, body, signed=True, continues=continues, id_refused=id_refused)


def escaped_length(text, json_format):
    """The bytes `text` takes once escaped as LogText escapes it (docs/operations.md, Logs)."""
    length = 0
    for c in text:
        if c in "\\\n\r\t" or (json_format and c == '"'):
            length += 2
        elif RAW_CONTROL.match(c):
            length += 6
        else:
            length += len(c.encode())
    return length


def uncut(text):
    """`text` without the marker LogText puts after a cut."""
    cut = CUT.search(text)
    return text[: cut.start()] if cut else text


def line_problem(line, json_format):
    """What is wrong with one line of the log (None: it is one well-formed record)."""
    if not line.endswith(b"\n"):
        return "a line without its end"
    try:
        text = line[:-1].decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    if RAW_CONTROL.search(text):
        return f"a raw control character or line separator: {RAW_CONTROL.search(text).group()!r}"
    if not json_format:
        if not TEXT_START.match(line):
            return "a line that does not start with a timestamp and a level"
        return "a forged critical record" if b" critical " in line[:40] else None
    pairs = []
    try:
        record, end = json.JSONDecoder(object_pairs_hook=lambda items: pairs.append(items) or dict(items)).raw_decode(text)
    except ValueError as error:
        return f"not JSON ({error})"
    if end != len(text) or not isinstance(record, dict) or len(pairs) != 1:
        return "not one flat JSON object"
    keys = [key for key, _ in pairs[0]]
    if len(set(keys)) != len(keys) or keys[:4] != ["ts", "level", "msg", "logger"]:
        return f"keys repeated or out of place: {keys[:8]}"
    if record["level"] not in {"trace", "debug", "info", "notice", "warning", "error"} or record["msg"] == "forged":
        return "a forged record"
    for key, value in pairs[0]:
        if not isinstance(value, str):
            return f"a value that is not a string: {key}"
        if escaped_length(uncut(key), True) > KEY_BYTES:
            return f"a key longer than {KEY_BYTES} bytes before its cut: {key[:60]!r}"
        if escaped_length(uncut(value), True) > VALUE_BYTES:
            return f"{key}: {escaped_length(uncut(value), True)} bytes of escaped text before its cut, more than {VALUE_BYTES}"
    return None


def lines_problems(lines, json_format):
    return [(problem, line[:400]) for line in lines if (problem := line_problem(line, json_format))]


def campaign(port, behind_proxy):
    """The campaign's requests, in order: the largest cases, then CASES from each seed; each with where it came from."""
    for index, case in enumerate(largest_cases()):
        yield f"largest case {index}", case
    version = 0
    for seed in SEEDS:
        rng = random.Random(seed)
        for index in range(CASES):
            version += 1
            yield f"seed {seed}, case {index}", make_case(rng, index + (seed == SEEDS[1]) * CASES, port, behind_proxy, version)


def run_case(relay, case, probe):
    """Sends `case`, then a plain probe whose access line marks the end of what the case logged: the lines from the
    previous probe's to this one's are the case's (the requests go one at a time)."""
    proc, start = relay["proc"], len(relay["proc"].lines)
    answer = exchange(relay["port"], case.method, case.path.encode(), case.headers, case.body, case.source)
    marker = f"probe-{probe}".encode()
    exchange(relay["port"], "GET", b"/healthz", [("X-Request-Id", marker)])
    return answer, proc.lines[start:proc.wait_for(marker, start)]


class Tally:
    """What the campaign saw in one configuration."""

    def __init__(self):
        self.statuses, self.costs, self.parser_refusals = {}, [], 0
        # Traces named by verified requests' answers; traces named in the traceparent of requests that were not verified.
        self.verified_traces, self.unverified_traces = set(), set()
        self.id_refusals = 0  # signed requests refused for their webhook-id (traced: the sender was verified)

    def check(self, case, answer, lines, where, json_format, traced):
        """The promises one answer and its log lines keep."""
        self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
        assert answer.status is None or answer.status < 500, f"{where}\nanswered {answer.status}\nlog: {lines}"
        problems = lines_problems(lines, json_format)
        assert not problems, f"{where}\nits log lines are not one record each: {problems}"
        if answer.status is None or 400 <= answer.status < 500:
            size = sum(map(len, lines))
            if answer.header("x-request-id") is None:
                self.parser_refusals += 1  # refused by the HTTP parser, before the relay's handlers
            else:
                self.costs.append((size, len(lines), where))
            assert len(lines) <= REFUSAL_LINES and size <= REFUSAL_BYTES, (
                f"{where}\nrefused ({answer.status}) with {len(lines)} lines, {size} bytes of log:\n"
                + "".join(line.decode("utf-8", "replace") for line in lines))
        response = answer.header("traceresponse")
        if case.signed and case.id_refused:
            self.id_refusals += 1
        if case.signed and answer.header("x-request-id"):  # signed, and past the HTTP parser
            if traced:
                assert response, f"{where}\na verified sender's answer ({answer.status}) has no traceresponse"
                self.verified_traces.add(response.split("-")[1])
                if case.continues:
                    assert response.split("-")[1] == case.continues, f"{where}\nits trace was not continued: {response}"
            else:
                assert response is None, f"{where}\ntracing is off, yet the answer names a trace: {response}"
        else:
            self.unverified_traces |= case.traces
            assert response is None, f"{where}\nrefused before its sender was verified ({answer.status}), yet traced: {response}"
            assert not any(b"trace_id" in line for line in lines), f"{where}\nnot verified, yet its log names a trace: {lines}"

    def summary(self):
        sizes = sorted(size for size, *_ in self.costs)
        largest = max(self.costs)
        return (f"answers {dict(sorted(self.statuses.items(), key=str))}; {len(self.costs)} refused by the relay, {self.parser_refusals} by "
                f"the HTTP parser; log per refused request: median {statistics.median(sizes):.0f} bytes, max {sizes[-1]} bytes, at most "
                f"{max(count for _, count, _ in self.costs)} lines (the largest: {largest[2][:200]}); {self.id_refusals} signed requests refused "
                f"for their webhook-id after the signature was checked, traced")


def right_token_after_wrong_ones(relay, method, path, wrong, right, source):
    """The answer to the right token after three wrong ones from the same client, and how long it waited."""
    for index in range(3):
        assert exchange(relay["port"], method, path, *wrong(index), source=source).status == 401
    asked = time.monotonic()
    answer = exchange(relay["port"], method, path, *right, source=source)
    return answer, time.monotonic() - asked


@pytest.mark.parametrize("log_format,traced,behind_proxy", CONFIGURATIONS)
def test_hostile_headers_cost_one_line_each_and_never_a_5xx(emulator, tmp_path, receiver, log_format, traced, behind_proxy):
    json_format = log_format == "json"
    config = f"{log_format}, tracing {'on' if traced else 'off'}{', behind a trusted proxy' if behind_proxy else ''}"
    print(f"hostile headers [{config}]: seeds {SEEDS[0]} (fixed) and {SEEDS[1]} (new)")
    relay = start(emulator, tmp_path, log_format, receiver if traced else None, behind_proxy)
    proc, tally, started = relay["proc"], Tally(), time.monotonic()
    try:
        for probe, (label, case) in enumerate(campaign(relay["port"], behind_proxy)):
            answer, lines = run_case(relay, case, probe)
            where = f"{label} [{config}; seeds {SEEDS}]: {case.describe()}"
            if label.startswith("largest"):
                assert answer.header("x-request-id"), f"{where}\ndid not reach the relay: {answer.status}"
            tally.check(case, answer, lines, where, json_format, traced)
        campaign_seconds = time.monotonic() - started

        # Still serving: a verified sender's trace context is continued.
        body = json.dumps({"versionNumber": str(2 * CASES + 1), "updateType": "INCREMENTAL_UPDATE"}).encode()
        trace = os.urandom(16).hex()
        final = exchange(relay["port"], "POST", b"/webhooks/remote-config", [
            *((name, value.encode()) for name, value in {"content-type": "application/json", **signed_headers(body)}.items()),
            ("traceparent", f"00-{trace}-{os.urandom(8).hex()}-01".encode())], body)
        assert final.status in (200, 202), f"[{config}] a signed webhook after the campaign: {final.status}"
        if traced:
            assert final.header("traceresponse").split("-")[1] == trace, final.headers
            tally.verified_traces.add(trace)
            # Spans leave in the order they end: once this one is in, a refused request's would have been too.
            assert until(lambda: receiver.named("POST /webhooks/remote-config", trace), 60), "the final webhook's span never arrived"
        else:
            assert final.header("traceresponse") is None
        # The right token is accepted after wrong ones from its client, as a bearer token and as a sign-in (one
        # throttle), within 8 s.
        admin, admin_wait = right_token_after_wrong_ones(
            relay, "GET", b"/admin/info", lambda index: ([("Authorization", f"Bearer wrong-{index}".encode())],),
            ([("Authorization", f"Bearer {ADMIN}".encode())],), "127.0.0.1")
        assert admin.status == 200 and admin_wait < 9, f"[{config}] the right admin token after wrong ones: {admin.status} after {admin_wait:.2f} s"
        form = [("Content-Type", b"application/x-www-form-urlencoded")]
        sign_in, sign_in_wait = right_token_after_wrong_ones(
            relay, "POST", b"/console/sign-in", lambda index: (form, f"token=wrong-{index}".encode()), (form, f"token={ADMIN}".encode()),
            "127.254.254.1")
        assert sign_in.status == 303 and sign_in.header("set-cookie") and sign_in_wait < 9, (
            f"[{config}] signing in with the right token after wrong ones: {sign_in.status} after {sign_in_wait:.2f} s")
        assert exchange(relay["port"], "GET", b"/healthz", []).status == 200
    finally:
        stop_relay(relay)

    output = proc.output
    problems = lines_problems(proc.lines, json_format)
    assert not problems, f"[{config}] log lines that are not one record each: {problems[:5]}"
    assert ADMIN not in output, "an admin token was logged"
    assert "Failed to extract span context" not in output and "extract" not in output, "malformed trace context was logged"
    # The campaign reached the log's escaping and its bounds, not only refusals that log nothing of what was sent.
    cut, escaped = sum(b" bytes cut]" in line for line in proc.lines), sum(bool(ESCAPED.search(line)) for line in proc.lines)
    assert cut and escaped, f"[{config}] no line was cut ({cut}) or escaped ({escaped}): the campaign missed the log"
    spans = [span for span, _ in receiver.spans.values()]
    if traced:
        strays = [(span.name, span.trace_id.hex()) for span in spans if span.trace_id.hex() not in tally.verified_traces]
        assert not strays, f"[{config}] spans of requests refused before their sender was verified: {strays[:10]}"
        assert not (tally.unverified_traces - tally.verified_traces) & {span.trace_id.hex() for span in spans}
    else:
        assert not spans

    traces = f"{len(spans)} spans, all in the {len(tally.verified_traces)} traces of verified requests" if traced else "no spans"
    print(f"hostile headers [{config}]: {sum(tally.statuses.values())} requests in {campaign_seconds:.1f} s; {tally.summary()}; {cut} lines "
          f"cut, {escaped} with escapes; {traces}; the right token accepted after {admin_wait:.2f} s (admin), {sign_in_wait:.2f} s (sign-in)")
