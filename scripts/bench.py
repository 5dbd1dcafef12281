#!/usr/bin/env python3
"""rc-relay's benchmark: one command, one table and one JSON line.

The relay (a release build) and the FCM emulator run as separate processes on loopback. wrk replays pre-signed
Standard Webhooks requests with distinct ids and version numbers, and is also pointed straight at the emulator's
messages:send to measure the ceiling the relay's throughput is compared with. Two yardsticks are measured the same
way in the same runs: the bare Hummingbird + AsyncHTTPClient relay of issue #7 (Benchmarks/Sources/BareRelay: the
minimum), and the fair floor of issue #35 (Benchmarks/Sources/FairFloor: the minimum plus the guarantees any production
relay owes: an access and a decision log line per webhook, a read timeout, a bounded wait for the send). Afterwards the
emulator's count of accepted messages must equal each relay's count of 2xx answers, or the run is void. Last, an idle
relay (production configuration, nothing arriving) is watched for a minute: its threads' wake-ups and CPU ticks.

Usage: scripts/bench [--bin PATH] [--duration 10] [--connections 32] [--runs 3] [--projects 32] [--no-bare] [--micro]
                     [--store [--replicas 2] [--dedup-window 600]] [--tls] [--flood] [--idle-seconds 60]
       scripts/bench --idle-only --projects 10000 [--store] [--idle-seconds 30]

--projects N (default 32): the webhooks name N projects in turn (binary-mode CloudEvents, `ce-source`), each with the
same credentials and route. With one project, 32 connections of consecutive versions overtake each other, and rc-relay
lets about a third of its pings stand down for a newer version FCM accepted already (no request): less work than the
yardsticks do, which send every one. Spread over 32 projects, a project's consecutive versions are 32 requests apart
and almost every webhook is sent, as the yardsticks' are; the share that stood down is a row of the table either way.
--tls: the emulator serves HTTPS with HTTP/2 (as fcm.googleapis.com does) on a certificate of a CA made for the run,
which both relays trust as rc-relay's fcm.caFile says; run it beside a plaintext run to compare.
--flood: also measure refusals of an unauthenticated flood, and signed webhooks answered during it; and the same flood,
         with hostile trace context, on a relay with tracing on (issue #48): refusals/s, CPU and log bytes per refusal.
--store: also a relay with store.postgres on a throwaway PostgreSQL cluster, and (unless --no-bare) the store floor:
the fair floor on the same cluster, committing each event under a unique key before it answers and marking it settled
once FCM accepts it, both in batches, and pruning what is settled past its deduplication window, one statement a
second (Benchmarks/Sources/FairFloor/StoreFloor.swift). Each store load also reports PostgreSQL's WAL per webhook
(bytes, records, full-page images: pg_stat_wal), its CPU per webhook, and the checkpoints begun during it.
--replicas 2 (with --store): also two rc-relay replicas on the cluster, started together so they share the projects,
under one load spread over both with every fifth webhook sent to both (scripts/bench_store.py): distinct webhooks/s,
p99, duplicates, lost, 5xx and PostgreSQL's deadlocks.
--idle-only: many projects, idle (issue #52; scripts/bench_idle.py): a relay with --projects projects in memory and,
with --store, one and then two replicas sharing them on PostgreSQL; the time to /readyz and to every lease, then each
replica's CPU, wake-ups and RSS and PostgreSQL's CPU and wake-ups over --idle-seconds. Nothing else is measured.
--dedup-window S: the store relays' `delivery.dedupWindowSeconds` and the store floor's pruning window (default 600,
rc-relay's default); shorter than a load, pruning runs during it.
"""
import argparse
import csv
import datetime
import base64
import hashlib
import hmac
import json
import os
import platform
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import bench_idle
import bench_store

ROOT = Path(__file__).resolve().parents[1]
SECRET = "whsec_" + base64.b64encode(b"rc-relay-benchmark-secret-32byte").decode()
# With --tls: the run's CA, which the script's own requests to the emulator trust too.
TLS_CONTEXT = None


def http(method, url, body=None, headers=None, timeout=60):
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=TLS_CONTEXT if url.startswith("https") else None) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def signed(body: bytes, msg_id: str, timestamp=None):
    timestamp = str(timestamp or int(time.time()))
    key = base64.b64decode(SECRET[len("whsec_"):])
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return {"content-type": "application/json", "webhook-id": msg_id, "webhook-timestamp": timestamp,
            "webhook-signature": "v1," + base64.b64encode(digest).decode()}


class Process:
    def __init__(self, args, log, env=None):
        self.log = open(log, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def wait_for_line(self, path, needle, timeout=30, count=1):
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = Path(path).read_text()
            if text.count(needle) >= count:
                return text
            time.sleep(0.001)  # the start figure waits for this line: a coarser poll would add to it
        raise SystemExit(f"{path} never showed {needle!r}:\n{Path(path).read_text()}")

    def cpu_ticks(self):
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def cpu_seconds(self):
        return self.cpu_ticks() / os.sysconf("SC_CLK_TCK")

    def context_switches(self):
        """Each thread's voluntary and involuntary switches, by thread id: a thread that wakes up and sleeps again
        counts one at least."""
        counts = {}
        for status in Path(f"/proc/{self.proc.pid}/task").glob("*/status"):
            try:
                text = status.read_text()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            counts[status.parent.name] = sum(int(n) for n in re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)", text, re.M))
        return counts

    def cpu_ns(self):
        """Each thread's CPU time in nanoseconds, by thread id, exact (the scheduler's own count,
        /proc/PID/task/*/schedstat), where `cpu_ticks` counts the 10 ms clock ticks that found it running: a few
        microseconds of work can cost a tick. A thread that ends takes its count with it, so compare by thread: a
        sum over the threads alive at each end went below zero when Swift's runtime let idle worker threads go."""
        times = {}
        for stat in Path(f"/proc/{self.proc.pid}/task").glob("*/schedstat"):
            try:
                times[stat.parent.name] = int(stat.read_text().split()[0])
            except FileNotFoundError:  # the thread ended meanwhile
                continue
        return times

    def memory_kb(self, field):
        match = re.search(rf"{field}:\s+(\d+) kB", Path(f"/proc/{self.proc.pid}/status").read_text())
        return int(match.group(1))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def certificates(work):
    """A CA, and a certificate it signed for localhost and 127.0.0.1 (made as the transport tests make theirs)."""
    sys.path.insert(0, str(ROOT / "Tests" / "interop"))
    from certificates import make_certificates

    return make_certificates(work / "tls", ca_name="rc-relay benchmark CA")


def bench_projects(count):
    """The projects of the many-project load: the key's own, then others its account may also send for."""
    return ["demo-project"] + [f"bench-project-{n}" for n in range(1, count)]


def start_emulator(binary, work, latency_ms=0, tls=None, name=None, projects=1):
    name = name or f"emulator-{latency_ms}"
    log = work / f"{name}.log"
    key = work / f"key-{name}.json"  # a key file of its own: an emulator keeps the one it finds, with its token URI
    options = ["--tls-cert", str(tls["cert"]), "--tls-key", str(tls["key"])] if tls else []
    if projects > 1:
        options += ["--also-sends-for", ",".join(bench_projects(projects)[1:])]
    proc = Process([binary, "emulator", "--port", "0", "--key-file", str(key), "--latency-ms", str(latency_ms), *options], log)
    text = proc.wait_for_line(log, "fcm-emulator listening")
    url = re.search(r"listening on (https?://\S+)", text).group(1)
    return proc, url, key


def start_relay(binary, work, emulator_url, key, routes=None, name="relay", extra="", ca=None, projects=1):
    config = work / f"{name}.yaml"
    route_yaml = ""
    if routes:
        route_yaml = "routes:\n" + "".join(f"  - {{name: r{i}, topic: t{i}}}\n" for i in range(routes))
    if projects > 1:  # each with the top-level credentials and routes
        route_yaml += "projects:\n" + "".join(f"  - {{id: {project}}}\n" for project in bench_projects(projects))
    config.write_text(f"""
server: {{port: 0}}
webhook: {{secrets: ["{SECRET}"]}}
fcm: {{credentialsFile: "{key}", baseURL: "{emulator_url}"{f', caFile: "{ca}"' if ca else ""}}}
delivery: {{answerWithinSeconds: 120, concurrency: 64}}
{route_yaml}{extra}""")
    log = work / f"{name}.log"
    started = time.monotonic()
    # The benchmark measures the relay, not its pace: FCM's whole quota (10,000 a second) instead of the default 1,000.
    # Given as a variable, which builds from before `delivery.messagesPerSecond` ignore, so older builds still run.
    proc = Process([binary, "serve", "--config", str(config)], log, env={"RC_RELAY_DELIVERY_MESSAGES_PER_SECOND": "10000"})
    # The default logs (level info, text), as issue #20 asks: each request keeps its access line, each webhook its
    # decision line.
    text = proc.wait_for_line(log, "rc-relay listening")
    address = re.search(r"address=(\S+)", [l for l in text.splitlines() if "rc-relay listening" in l][0]).group(1)
    return proc, f"http://{address}/webhooks/remote-config", started


def access_token(emulator_url):
    """An access token from the emulator's metadata server, for the yardsticks (which fetch none themselves)."""
    _, body = http("GET", emulator_url + "/computeMetadata/v1/instance/service-accounts/default/token",
                   headers={"Metadata-Flavor": "Google"})
    return json.loads(body)["access_token"]


def start_yardstick(name, work, emulator_url, token, ca=None, message=None, postgres=None, dedup_window=600):
    """A yardstick (Benchmarks/): `bare-relay`, bare Hummingbird + AsyncHTTPClient doing only the minimum, or
    `fair-floor`, the same plus the guarantees any production relay owes. Built (release) when missing or older than
    its sources. `message`: the FCM message it sends, with `@VERSION@` for the version (default: a minimal one).
    `postgres`: a database URL, which makes the fair floor the store floor (each event committed before the answer,
    settled once FCM accepts it: Benchmarks/Sources/FairFloor/StoreFloor.swift)."""
    binary = ROOT / "Benchmarks" / ".build" / "release" / name
    sources = [p for p in (ROOT / "Benchmarks").rglob("*.swift") if ".build" not in p.parts]
    if not binary.exists() or binary.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        subprocess.run(["swift", "build", "-c", "release", "--package-path", "Benchmarks", "--product", name,
                        "--static-swift-stdlib"], cwd=ROOT, check=True)
    log = work / ("store-floor.log" if postgres else f"{name}.log")
    env = ({"YARDSTICK_MESSAGE": message} if message else {}) | ({"FAIR_FLOOR_POSTGRES": postgres} if postgres else {})
    env |= {"FAIR_FLOOR_DEDUP_WINDOW_SECONDS": str(dedup_window)} if postgres else {}
    proc = Process([str(binary), "0", emulator_url, token, SECRET, *([str(ca)] if ca else [])], log, env=env)
    text = proc.wait_for_line(log, f"{name} listening")
    return proc, re.search(r"listening on (http://\S+)", text).group(1) + "/webhooks/remote-config"


def idle(binary, work, emulator_url, key, seconds, ca=None):
    """A relay on a production configuration (no poll, nothing arriving) for `seconds` after it settled: its threads'
    wake-ups a second (context switches, all threads) and its CPU ticks."""
    relay, url, _ = start_relay(binary, work, emulator_url, key, name="idle", ca=ca)
    try:
        return watch_idle(relay, url, seconds)
    finally:
        relay.stop()


def idle_fair_floor(work, emulator_url, seconds, ca=None):
    """The same watch of the fair floor: what any relay on Swift's runtime costs idle (the yardstick for the idle
    target; libdispatch's once-a-second timer is in every Swift process that has run a task, docs/performance.md)."""
    floor, url = start_yardstick("fair-floor", work, emulator_url, access_token(emulator_url), ca=ca)
    try:
        return watch_idle(floor, url, seconds)
    finally:
        floor.stop()


def watch_idle(proc, url, seconds):
    first_accepted(url, time.monotonic())  # one webhook: the token is fetched and cached, as in production
    time.sleep(5)  # what a start and a first webhook leave (the token's refresh timer, idle connections) settles
    switches, ticks, ns = proc.context_switches(), proc.cpu_ticks(), proc.cpu_ns()
    time.sleep(seconds)
    after = proc.context_switches()
    # Threads that ended meanwhile take their counts with them; threads started meanwhile count from zero.
    woken = sum(count - switches.get(thread, 0) for thread, count in after.items())
    spent = sum(now - ns.get(thread, 0) for thread, now in proc.cpu_ns().items())
    return woken / seconds, proc.cpu_ticks() - ticks, spent / 1e6


def checkpointing(cluster, began, ended):
    """Whether PostgreSQL had a checkpoint under way between the two times (its log: `checkpoint starting` and
    `checkpoint complete` lines, UTC)."""
    under_way, since = False, None
    for line in (cluster.dir / "log").read_text(errors="replace").splitlines():
        match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) UTC .*checkpoint (starting|complete)", line)
        if not match:
            continue
        at = datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()
        if match.group(2) == "starting":
            since = at
        elif since is not None:
            under_way |= since < ended and at > began
            since = None
    return under_way or (since is not None and since < ended)


def first_accepted(url, started):
    """Time from process start to the first webhook answered 200 (it was already listening)."""
    body = json.dumps({"versionNumber": "1"}).encode()
    status, _ = http("POST", url, body, signed(body, "msg_first"))
    assert status == 200, status
    return time.monotonic() - started


LUA = r"""
-- One request per line: id, timestamp, signature, project ("-": a bare version), body (tab-separated); a table literal
-- this large overflows LuaJIT.
local requests = {}
for line in io.lines("%s") do
  local id, ts, sig, project, body = line:match("([^\t]+)\t([^\t]+)\t([^\t]+)\t([^\t]+)\t(.+)")
  local headers = {
    ["Content-Type"] = "application/json", ["webhook-id"] = id, ["webhook-timestamp"] = ts, ["webhook-signature"] = sig,
  }
  if project ~= "-" then
    headers["ce-specversion"] = "1.0"
    headers["ce-type"] = "google.firebase.remoteconfig.remoteConfig.v1.updated"
    headers["ce-source"] = "//firebaseremoteconfig.googleapis.com/projects/" .. project
    headers["ce-id"] = id
  end
  requests[#requests + 1] = wrk.format("POST", "%s", headers, body)
end
local count = #requests
local next_id = 1
setup = function(thread)
  thread:set("offset", next_id)
  next_id = next_id + 1
end
init = function(args)
  assert(count > 0, "no requests loaded")
  i = offset - %d
end
request = function()
  i = i + %d
  return requests[((i - 1) %% count) + 1]
end
response = function(status, headers, body)
  if status >= 300 then io.stderr:write("non-2xx answer: " .. status .. " " .. body .. "\n") end
end
"""


FLOOD_LUA = r"""
-- Unauthenticated requests, in turn: a wrong signature, a replay (a valid signature, an hour old) and a
-- webhook-signature header of 1,000 entries.
local requests = {
%s
}
local i = 0
request = function()
  i = i + 1
  return requests[(i %% #requests) + 1]
end
response = function(status, headers, body)
  if status < 400 or status >= 500 then io.stderr:write("flood answered " .. status .. "\n") end
end
"""


# Issue #48's hostile trace context: a version the tracer's parser refuses, a valid one, and 8 KB of tracestate that is
# not well formed. Refused before the sender is verified, none of it may cost anything: the flood of the traced relay
# carries them on every request.
HOSTILE_TRACE = [
    {"traceparent": "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "x" * 8192},
    {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": ("k=v=w," * 1366)[:8192]},
]


def write_flood(path, target_path, trace=False):
    body = json.dumps({"versionNumber": "1"}, separators=(",", ":"))
    now = int(time.time())
    fake = "v1," + base64.b64encode(bytes(32)).decode()
    variants = [
        {"webhook-id": "msg_forged", "webhook-timestamp": str(now), "webhook-signature": fake},
        signed(body.encode(), "msg_replayed", timestamp=now - 3600),
        {"webhook-id": "msg_oversized", "webhook-timestamp": str(now), "webhook-signature": " ".join([fake] * 1000)},
    ]
    if trace:
        variants = [{**headers, **HOSTILE_TRACE[index % 2]} for index, headers in enumerate(variants * 2)]
    lines = []
    for headers in variants:
        fields = ", ".join(f"[{json.dumps(k)}] = {json.dumps(v)}" for k, v in {"Content-Type": "application/json", **headers}.items())
        lines.append(f"  wrk.format(\"POST\", {json.dumps(target_path)}, {{{fields}}}, {json.dumps(body)}),")
    path.write_text(FLOOD_LUA % "\n".join(lines))


class OTLPSink:
    """A collector that takes every OTLP/HTTP export and answers 200 (an empty ExportTraceServiceResponse), counting the
    bytes it was sent: the traced relay's spans go here."""

    def __init__(self):
        import http.server
        import threading

        sink = self
        self.received = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                sink.received += len(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


def flood(process, target, script, connections, duration, probe=None, log=None):
    """wrk floods `target` with refused requests; meanwhile `probe` (a function returning one signed webhook's latency in
    seconds, or None) runs one after another. Returns (wrk, CPU ms per refusal, probe latencies); with `log` (the
    process's log file), the result's `log_bytes` is its growth per refusal."""
    cpu_before = process.cpu_seconds()
    log_before = log.stat().st_size if log else 0
    command = ["wrk", "-t", "2", "-c", str(connections), "-d", f"{duration}s", "--latency", "-s", str(script), target]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        runner = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        latencies = []
        time.sleep(0.5)  # the flood first
        while probe and runner.poll() is None:
            latencies.append(probe())
            time.sleep(0.01)
        runner.wait()
        out.seek(0)
        err.seek(0)
        output, errors = out.read(), err.read()
    if runner.returncode or "flood answered" in errors:
        raise SystemExit(f"void flood run: {errors[-2000:]}")
    result = parse_wrk(output)
    if result["requests"] != result["non2xx"]:
        raise SystemExit(f"void flood run: {result['requests'] - result['non2xx']} requests were not refused")
    if log:
        time.sleep(0.2)  # the last access lines
        result["log_bytes"] = (log.stat().st_size - log_before) / max(result["requests"], 1)
    return result, (process.cpu_seconds() - cpu_before) / max(result["requests"], 1) * 1000, latencies


def accepted(emulator_url):
    """The messages the emulator has accepted so far."""
    return json.loads(http("GET", emulator_url + "/emulator/stats")[1])["accepted"]


def superseded(relay_url):
    """The pings the relay ended `superseded` so far (rc_relay_pings_total): a webhook whose version FCM had already
    accepted a newer ping of, for the same audience, is answered 2xx without a message of its own (issue 32)."""
    status, body = http("GET", relay_url.split("/webhooks/")[0] + "/metrics")
    if status != 200:  # the bare relay and the fair floor have no /metrics: none stood down
        return 0
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
               if line.startswith("rc_relay_pings_total{") and 'outcome="superseded"' in line)


def write_requests(path, count, first_version, projects=1):
    """Signed bare versions; with several projects, binary-mode CloudEvents (Eventarc's form) whose `ce-source` names
    them in turn. The yardsticks read the same requests and ignore the `ce-` headers."""
    names = bench_projects(projects)
    with open(path, "w") as out:
        for n in range(count):
            version = first_version + n
            body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}, separators=(",", ":"))
            headers = signed(body.encode(), f"msg_{version}")
            project = names[version % projects] if projects > 1 else "-"
            out.write(f"{headers['webhook-id']}\t{headers['webhook-timestamp']}\t{headers['webhook-signature']}\t{project}\t{body}\n")


def wrk(script, url, connections, duration, threads=2):
    output = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{duration}s", "--latency", "-s", str(script), url],
        capture_output=True, text=True, check=True)
    for line in output.stderr.splitlines():
        print(line, file=sys.stderr)
    return parse_wrk(output.stdout)


def parse_wrk(output):
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    non2xx = int(m.group(1)) if (m := re.search(r"Non-2xx or 3xx responses: (\d+)", output)) else 0
    errors = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", output))

    def ms(label):
        value, unit = re.search(rf"\s{label}%\s+([\d.]+)(us|ms|s)", output).groups()
        return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]

    return {"requests": requests, "ok": requests - non2xx, "non2xx": non2xx, "socket_errors": errors,
            "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)), "p50_ms": ms("50"), "p99_ms": ms("99")}


def mark(value, comparison, target):
    """A ratio or figure with a ✓ or ✗ against its target."""
    met = value >= target if comparison == ">=" else value <= target
    return f"{value:.2f} {'✓' if met else '✗'}"


def micro():
    """The micro-benchmarks of the hot path: nanoseconds per operation, by name."""
    result = subprocess.run(
        ["swift", "run", "-c", "release", "--package-path", str(ROOT / "Benchmarks"), "micro",
         "--format", "csv", "--columns", "name,time", "--time-unit", "ns", "--quiet"],
        cwd=ROOT, check=True, capture_output=True, text=True)
    timings = {}
    for row in csv.reader(result.stdout.strip().splitlines()[1:]):
        timings[row[0]] = float(row[1].split()[0])
    return timings


def release_binary():
    """The checkout's release build, as the Dockerfile builds it, brought up to date (a build left from older sources was
    measured as it was); about 25 s on this machine when nothing changed."""
    subprocess.run(["swift", "build", "-c", "release", "--product", "rc-relay", "--static-swift-stdlib"], cwd=ROOT, check=True)
    return str(ROOT / ".build" / "release" / "rc-relay")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", help="the rc-relay binary to measure (default: a release build of the checkout, made or brought up to date first)")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--projects", type=int, default=32,
                        help="spread the webhooks over this many projects (1: one project, as before 2026-11-27); see below")
    parser.add_argument("--no-bare", action="store_true", help="skip the yardsticks (the bare relay and the fair floor)")
    parser.add_argument("--idle-seconds", type=int, default=60, help="how long the idle relay is watched (0: not at all)")
    parser.add_argument("--micro", action="store_true", help="also run the micro-benchmarks (Benchmarks/, a release build of its own)")
    parser.add_argument("--store", action="store_true",
                        help="also run a relay on a throwaway PostgreSQL (store.postgres, default durability) in the same runs")
    parser.add_argument("--replicas", type=int, choices=[1, 2], default=1,
                        help="with --store: also two replicas on the cluster under a load spread over both, a fifth sent to both")
    parser.add_argument("--dedup-window", type=int, default=600,
                        help="with --store: the store relays' delivery.dedupWindowSeconds and the store floor's pruning window")
    parser.add_argument("--idle-only", action="store_true",
                        help="only the many-projects idle measurement (issue #52): --projects projects, in memory and with --store")
    parser.add_argument("--tls", action="store_true", help="the emulator serves HTTPS with HTTP/2, as FCM does")
    parser.add_argument("--flood", action="store_true",
                        help="also flood each relay with refused requests, and time signed webhooks sent during it")
    parser.add_argument("--same-message", action="store_true",
                        help="the yardsticks send the message rc-relay sends (its route's silent-push blocks), not a minimal one")
    parser.add_argument("--keep", action="store_true",
                        help="keep the working directory (logs, scripts, configurations; about 600 MB) and print its path")
    args = parser.parse_args()
    args.bin = args.bin or release_binary()
    # Each run's logs come to several hundred megabytes: the directory goes when the run ends, unless asked to stay.
    work = Path(tempfile.mkdtemp(prefix="rc-relay-bench-"))
    try:
        idle_only(args, work) if args.idle_only else bench(args, work)
    finally:
        if args.keep:
            print(f"bench: the working directory is kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


# The projects the idle mode's emulator lets the key send for (`--also-sends-for`, one argument: the kernel takes at
# most 128 KB in one). An idle relay sends nothing, so the others need not be trusted.
IDLE_TRUSTED = 1000


def idle_only(args, work):
    """Issue #52's idle mode (scripts/bench_idle.py): one table, one JSON line."""
    emulator, emulator_url, key = start_emulator(args.bin, work, projects=min(args.projects, IDLE_TRUSTED))
    results = []
    this = sys.modules[__name__]
    try:
        trusted = min(args.projects, IDLE_TRUSTED)
        results.append(bench_idle.idle_many(this, args.bin, work, emulator_url, key, args.projects, args.idle_seconds,
                                            trusted=trusted))
        if args.store:
            sys.path.insert(0, str(ROOT / "Tests" / "interop"))
            from postgres import Cluster

            for replicas in (1, 2):  # each on a cluster of its own, as a new deployment's
                cluster = Cluster(durable=True)
                try:
                    results.append(bench_idle.idle_many(this, args.bin, work, emulator_url, key, args.projects,
                                                        args.idle_seconds, cluster=cluster, replicas=replicas,
                                                        trusted=trusted))
                finally:
                    cluster.destroy()
    finally:
        emulator.stop()
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
    print(f"\nrc-relay benchmark, idle with {args.projects} projects for {args.idle_seconds} s; {machine}\n")
    rows = bench_idle.rows(results)
    width = max(len(r[0]) for r in rows)
    print(f"| {'mode'.ljust(width)} | figures |\n|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")
    print("\n" + json.dumps({"benchmark": "rc-relay idle", "machine": machine, "results": results}))


def bench(args, work):
    global TLS_CONTEXT
    tls = certificates(work) if args.tls else None
    ca = tls["ca"] if tls else None
    if tls:
        TLS_CONTEXT = ssl.create_default_context(cafile=str(ca))
    emulator, emulator_url, key = start_emulator(args.bin, work, tls=tls, projects=args.projects)
    relay, url, started = start_relay(args.bin, work, emulator_url, key, ca=ca, projects=args.projects)
    cluster = stored = store_floor = None
    # The store relays' deduplication window (the store floor prunes with the same): rc-relay's default unless asked.
    dedup_yaml = f"delivery: {{dedupWindowSeconds: {args.dedup_window}}}\n" if args.dedup_window != 600 else ""
    try:
        startup = first_accepted(url, started)
        idle_rss = relay.memory_kb("VmRSS")
        # The ceiling: the same generator straight at the emulator's messages:send.
        token = access_token(emulator_url)
        # Two ceilings: the message rc-relay sends (its default route: data plus the silent-push blocks for Android,
        # Apple and web, as the emulator recorded it) and a minimal topic-and-data message. The emulator's work per
        # message depends on the message, so the ratio is taken against the first: the same FCM-side work.
        sent_message = json.loads(http("GET", emulator_url + "/emulator/messages")[1])[-1]["message"]
        minimal_message = {"topic": "PUSH_RC", "data": {"CONFIG_STATE": "STALE", "CONFIG_VERSION": "1"}}
        ceiling_scripts = {}
        for name, message in (("same", sent_message), ("minimal", minimal_message)):
            ceiling_scripts[name] = work / f"ceiling-{name}.lua"
            ceiling_scripts[name].write_text(
                f'wrk.method = "POST"\nwrk.body = {json.dumps(json.dumps({"message": message}))}\n'
                f'wrk.headers["Content-Type"] = "application/json"\nwrk.headers["Authorization"] = "Bearer {token}"\n')
        # The floor: the relay's CPU for the cheapest request its HTTP stack serves, GET /healthz (no body, no client
        # call), under the same load: what one inbound exchange costs before any webhook work.
        floor_script = work / "floor.lua"
        floor_script.write_text('wrk.method = "GET"\n')
        bare = fair = None
        if not args.no_bare:
            # With --same-message the yardsticks send rc-relay's message, so the emulator (which shares the cores) does
            # the same work for each of them.
            same = None
            if args.same_message:
                same = json.dumps({**sent_message, "data": {**sent_message["data"], "CONFIG_VERSION": "@VERSION@"}}, separators=(",", ":"))
            bare, bare_url = start_yardstick("bare-relay", work, emulator_url, token, ca=ca, message=same)
            fair, fair_url = start_yardstick("fair-floor", work, emulator_url, token, ca=ca, message=same)
        if args.store:
            sys.path.insert(0, str(ROOT / "Tests" / "interop"))
            from postgres import Cluster

            cluster = Cluster(durable=True)
            # The store's p99 depends on whether PostgreSQL checkpoints during the run (docs/performance.md): its log
            # says when each checkpoint starts and ends, and each store run is marked by it.
            cluster.sql("ALTER SYSTEM SET log_checkpoints = on")
            cluster.sql("ALTER SYSTEM SET log_timezone = 'UTC'")
            cluster.sql("SELECT pg_reload_conf()")
            stored, stored_url, _ = start_relay(args.bin, work, emulator_url, key, name="store", ca=ca, projects=args.projects,
                                                extra=f'store: {{postgres: {{url: "{cluster.url}"}}}}\n' + dedup_yaml)
            # It delivers its own webhooks once it holds every project's lease.
            stored.wait_for_line(work / "store.log", "project lease taken", count=args.projects)
            if not args.no_bare:
                # The store's yardstick: the fair floor on the same cluster, with what any relay on a shared store owes.
                store_floor, store_floor_url = start_yardstick("fair-floor", work, emulator_url, token, ca=ca, message=same,
                                                               postgres=cluster.url, dedup_window=args.dedup_window)
        traced = sink = None
        if args.flood:
            # Issue #48: the same relay with tracing on, exporting to a sink that answers 200, flooded with hostile trace
            # context in the same runs: refusing must cost what it costs with tracing off.
            sink = OTLPSink()
            traced, traced_url, _ = start_relay(args.bin, work, emulator_url, key, name="traced", ca=ca, projects=args.projects,
                                                extra=f'tracing: {{otlpEndpoint: "{sink.url}"}}\n')
        runs = {key: [] for key in ("relay", "ceiling", "ceiling_minimal", "cpu", "floor", "bare", "bare_cpu", "bare_floor",
                                    "fair", "fair_cpu", "fair_floor",
                                    "store", "store_cpu", "store_db_cpu", "store_floor", "store_floor_cpu", "store_floor_db_cpu",
                                    "two_replicas",
                                    "flood", "flood_cpu", "flood_probe",
                                    "bare_flood", "bare_flood_cpu", "traced_flood", "traced_flood_cpu", "traced_export_bytes",
                                    "hostile_flood", "hostile_flood_cpu")}
        # Each target's versions follow the last one it was sent: a relay that saw another's load in between would
        # meet a jump of more than 100,000 past the newest it relayed, which makes every version of the run an
        # outlier (docs/webhook.md) with a warning line each, a different workload (it did, before 2026-11-27).
        versions = {}
        script = work / "relay.lua"
        requests_file = work / "requests.tsv"

        def load(process, target, label, connections=args.connections, threads=2):
            """One wrk run of fresh signed webhooks; void unless every 2xx has its FCM message. Returns (wrk, CPU ms)."""
            count = 25000 * args.duration  # more than either relay answers in the time (the bare relay has made 12,260/s)
            first = versions.get(target, 1000)
            write_requests(requests_file, count, first, projects=args.projects)
            script.write_text(LUA % (requests_file, "/webhooks/remote-config", threads, threads))
            accepted_before = accepted(emulator_url)
            superseded_before = superseded(target)  # the bare relay has no /metrics: 0
            cpu_before, emulator_before = process.cpu_seconds(), emulator.cpu_seconds()
            switches_before = sum(process.context_switches().values())
            result = wrk(script, target, connections, args.duration, threads=threads)
            cpu = process.cpu_seconds() - cpu_before
            # The hops a webhook costs: every time one of the process's threads sleeps and wakes (or is preempted).
            result["switches"] = (sum(process.context_switches().values()) - switches_before) / max(result["ok"], 1)
            # The FCM side's CPU per message in the same run: the ratio to the ceiling depends on it (see docs/performance.md).
            result["emulator_cpu_ms"] = (emulator.cpu_seconds() - emulator_before) / max(result["ok"], 1) * 1000
            time.sleep(0.5)
            sent = accepted(emulator_url) - accepted_before
            # Every 2xx must have its FCM message, or have stood down for a newer version FCM had accepted already
            # (webhooks on 32 connections overtake each other); wrk stops counting with up to one request per
            # connection in flight.
            stood_down = int(superseded(target) - superseded_before)
            result["superseded"] = stood_down
            sent += stood_down
            if result["non2xx"] or result["socket_errors"] or not 0 <= sent - result["ok"] <= connections or result["ok"] > count:
                raise SystemExit(
                    f"void run ({label}): {result['ok']} × 2xx and {result['non2xx']} × other "
                    f"({result['socket_errors']} socket errors), emulator accepted {sent}; see {work}")
            # The target's next load follows the last version sent. wrk's threads take every other request and need
            # not keep pace with each other: leave room past them (well within the 100,000 an outlier is beyond).
            versions[target] = first + int(1.5 * (result["ok"] + result["non2xx"])) + 2 * connections
            return result, cpu / max(result["ok"], 1) * 1000

        flood_script = work / "flood.lua"
        write_flood(flood_script, "/webhooks/remote-config")
        bare_flood_script = work / "bare-flood.lua"
        write_flood(bare_flood_script, "/refuse")
        traced_flood_script = work / "traced-flood.lua"
        write_flood(traced_flood_script, "/webhooks/remote-config", trace=True)

        def probe():
            """One signed webhook, on a connection of its own; its latency in seconds."""
            version = versions.get(url, 1000)
            versions[url] = version + 1
            body = json.dumps({"versionNumber": str(version)}).encode()
            began = time.monotonic()
            status, _ = http("POST", url, body, signed(body, f"msg_probe_{version}"))
            if status != 200:
                raise SystemExit(f"void flood run: a signed webhook was answered {status}")
            return time.monotonic() - began

        def floor(process, target):
            cpu_before = process.cpu_seconds()
            result = wrk(floor_script, target.replace("/webhooks/remote-config", "/healthz"), args.connections, args.duration)
            if result["non2xx"] or result["socket_errors"]:
                raise SystemExit(f"void run: GET /healthz answered {result}")
            return (process.cpu_seconds() - cpu_before) / max(result["ok"], 1) * 1000

        def load_on_store(process, target, label):
            """A load of a relay on the PostgreSQL cluster: also PostgreSQL's CPU ms per webhook, its WAL per webhook
            (bytes, records, full-page images), the checkpoints begun, and whether one was under way."""
            db_before, began, wal_before = cluster.cpu_seconds(), time.time(), bench_store.wal(cluster)
            result, cpu = load(process, target, label)
            db_cpu = (cluster.cpu_seconds() - db_before) / max(result["ok"], 1) * 1000
            result |= bench_store.per_webhook(wal_before, bench_store.wal(cluster), result["ok"])
            result["checkpoint"] = checkpointing(cluster, began, time.time())
            return result, cpu, db_cpu

        for run in range(args.runs + 1):  # run 0 warms up
            result, cpu = load(relay, url, "rc-relay")
            send_url = emulator_url + "/v1/projects/demo-project/messages:send"
            ceiling = wrk(ceiling_scripts["same"], send_url, args.connections, args.duration)
            ceiling_minimal = wrk(ceiling_scripts["minimal"], send_url, args.connections, args.duration)
            floor_ms = floor(relay, url)
            if bare:
                bare_result, bare_cpu = load(bare, bare_url, "bare relay")
                bare_floor = floor(bare, bare_url)
                fair_result, fair_cpu = load(fair, fair_url, "fair floor")
                fair_floor = floor(fair, fair_url)
            if stored:
                store_result, store_cpu, store_db_cpu = load_on_store(stored, stored_url, "rc-relay with PostgreSQL")
            if store_floor:
                store_floor_result, store_floor_cpu, store_floor_db_cpu = load_on_store(store_floor, store_floor_url, "store floor")
            if args.flood:
                flood_result, flood_cpu, probes = flood(relay, url, flood_script, args.connections, args.duration, probe,
                                                        log=work / "relay.log")
                # The same hostile requests to the relay without tracing: the yardstick for the traced one.
                hostile_result, hostile_cpu, _ = flood(relay, url, traced_flood_script, args.connections, args.duration,
                                                       log=work / "relay.log")
                exported_before = sink.received
                traced_result, traced_cpu, _ = flood(traced, traced_url, traced_flood_script, args.connections, args.duration,
                                                     log=work / "traced.log")
                time.sleep(5.5)  # the exporter's batch interval: whatever the flood made reaches the sink
                traced_exported = (sink.received - exported_before) / max(traced_result["requests"], 1)
                if bare:
                    bare_flood_result, bare_flood_cpu, _ = flood(
                        bare, bare_url.replace("/webhooks/remote-config", "/refuse"), bare_flood_script, args.connections, args.duration)
            if run == 0:
                continue
            if args.flood:
                runs["flood"].append(flood_result)
                runs["flood_cpu"].append(flood_cpu)
                runs["flood_probe"] += probes
                runs["hostile_flood"].append(hostile_result)
                runs["hostile_flood_cpu"].append(hostile_cpu)
                runs["traced_flood"].append(traced_result)
                runs["traced_flood_cpu"].append(traced_cpu)
                runs["traced_export_bytes"].append(traced_exported)
                if bare:
                    runs["bare_flood"].append(bare_flood_result)
                    runs["bare_flood_cpu"].append(bare_flood_cpu)
            if stored:
                runs["store"].append(store_result)
                runs["store_cpu"].append(store_cpu)
                runs["store_db_cpu"].append(store_db_cpu)
            if store_floor:
                runs["store_floor"].append(store_floor_result)
                runs["store_floor_cpu"].append(store_floor_cpu)
                runs["store_floor_db_cpu"].append(store_floor_db_cpu)
            runs["relay"].append(result)
            runs["cpu"].append(cpu)
            runs["ceiling"].append(ceiling)
            runs["ceiling_minimal"].append(ceiling_minimal)
            runs["floor"].append(floor_ms)
            if bare:
                runs["bare"].append(bare_result)
                runs["bare_cpu"].append(bare_cpu)
                runs["bare_floor"].append(bare_floor)
                runs["fair"].append(fair_result)
                runs["fair_cpu"].append(fair_cpu)
                runs["fair_floor"].append(fair_floor)
        if bare:
            bare.stop()
            fair.stop()
        if traced:
            traced.stop()
            sink.stop()
        if stored:
            stored.stop()
        if store_floor:
            store_floor.stop()
        if args.store and args.replicas == 2:
            pair, held = bench_store.start_two_replicas(start_relay, args.bin, work, emulator_url, key, cluster, args.projects, ca,
                                                        extra=dedup_yaml)
            runs["two_replicas_leases"] = held
            shape = SimpleNamespace(work=work, duration=args.duration, connections=args.connections, projects=args.projects,
                                    # Past the single store relay's versions (the store's marks), within the 100,000
                                    # beyond which a version is an outlier.
                                    next_version=versions.get(stored_url, 1000) + 2 * args.connections,
                                    write_requests=write_requests, LUA=LUA, parse_wrk=parse_wrk, accepted=accepted,
                                    superseded=superseded)
            try:
                for run in range(args.runs + 1):  # run 0 warms up
                    figures_two = bench_store.two_replicas_load(shape, cluster, [p for p, _ in pair], [u for _, u in pair],
                                                               emulator_url, "two replicas")
                    if run:
                        runs["two_replicas"].append(figures_two)
            finally:
                for proc, _ in pair:
                    proc.stop()
        # One connection: a webhook's own latency when nothing queues in front of it.
        single, _ = load(relay, url, "rc-relay, one connection", connections=1, threads=1)
        peak_rss = relay.memory_kb("VmHWM")
        # What the resident memory is, after the loads: anonymous (heap, buffers) or file-backed (the binary's code,
        # shared with any other process running it, and reclaimable).
        rollup = Path(f"/proc/{relay.proc.pid}/smaps_rollup").read_text()
        anonymous_kb = int(re.search(r"^Anonymous:\s+(\d+)", rollup, re.M).group(1))
        file_kb = int(re.search(r"^Rss:\s+(\d+)", rollup, re.M).group(1)) - anonymous_kb
    finally:
        relay.stop()
        emulator.stop()
        if cluster:
            cluster.destroy()
    if args.idle_seconds:
        emulator, emulator_url, key = start_emulator(args.bin, work, tls=tls, name="emulator-idle")
        try:
            idle_wakeups, idle_ticks, idle_cpu_ms = idle(args.bin, work, emulator_url, key, args.idle_seconds, ca=ca)
            floor_idle = None if args.no_bare else idle_fair_floor(work, emulator_url, args.idle_seconds, ca=ca)
        finally:
            emulator.stop()

    # Fan-out: one webhook to 1,000 routes, 50 ms of emulator latency, 64 requests in flight; after a warm-up, the
    # median of as many webhooks as there are runs.
    emulator, emulator_url, key = start_emulator(args.bin, work, latency_ms=50, tls=tls)
    relay, url, _ = start_relay(args.bin, work, emulator_url, key, routes=1000, name="fanout", ca=ca)
    try:
        http("POST", url, json.dumps({"versionNumber": "6"}).encode(), signed(json.dumps({"versionNumber": "6"}).encode(), "warm"))
        fanouts = []
        for run in range(args.runs):
            body = json.dumps({"versionNumber": str(7 + run)}).encode()
            began = time.monotonic()
            status, answer = http("POST", url, body, signed(body, f"fanout-{run}"))
            fanouts.append(time.monotonic() - began)
            delivered = sum(1 for d in json.loads(answer)["deliveries"] if d["status"] == "accepted")
            assert status == 200 and delivered == 1000, (status, delivered)
        fanout = statistics.median(fanouts)
        fanout_stats = json.loads(http("GET", emulator_url + "/emulator/stats")[1])
    finally:
        relay.stop()
        emulator.stop()
    ideal = 1000 / 64 * 0.050

    median = lambda key, runs: statistics.median(r[key] for r in runs)
    relay_runs = runs["relay"]
    figures = {
        "webhooks_per_s": median("rps", relay_runs),
        "ceiling_per_s": median("rps", runs["ceiling"]),
        "ratio_to_ceiling": median("rps", relay_runs) / median("rps", runs["ceiling"]),
        "ceiling_minimal_message_per_s": median("rps", runs["ceiling_minimal"]),
        "ratio_to_minimal_message_ceiling": median("rps", relay_runs) / median("rps", runs["ceiling_minimal"]),
        "p50_ms": median("p50_ms", relay_runs),
        "p99_ms": median("p99_ms", relay_runs),
        "p50_ms_one_connection": single["p50_ms"],
        "p99_ms_one_connection": single["p99_ms"],
        "cpu_ms_per_webhook": statistics.median(runs["cpu"]),
        "context_switches_per_webhook": median("switches", relay_runs),
        "emulator_cpu_ms_per_message": median("emulator_cpu_ms", relay_runs),
        "floor_cpu_ms_per_healthz": statistics.median(runs["floor"]),
        "peak_rss_mb": peak_rss / 1024,
        "after_loads_anonymous_mb": anonymous_kb / 1024,
        "after_loads_file_backed_mb": file_kb / 1024,
        "idle_rss_mb": idle_rss / 1024,
        "start_to_first_webhook_ms": startup * 1000,
        "fanout_1000_s": fanout,
        "fanout_ideal_s": ideal,
        "fanout_ratio": fanout / ideal,
        "fanout_connections": fanout_stats["sendConnections"],
        "fanout_http2_sends": fanout_stats["http2Sends"],
        "transport": "TLS, HTTP/2 by ALPN" if args.tls else "plaintext HTTP/1.1",
        "projects": args.projects,
        "non2xx": sum(r["non2xx"] for r in relay_runs),
        "superseded_share": sum(r["superseded"] for r in relay_runs) / max(sum(r["ok"] for r in relay_runs), 1),
    }
    if runs["bare"]:
        figures |= {
            "bare_webhooks_per_s": median("rps", runs["bare"]),
            # The yardsticks' message: a minimal one, or rc-relay's (--same-message); the bare relay's ceiling is its own.
            "yardstick_message": "rc-relay's" if args.same_message else "minimal",
            "bare_ratio_to_its_message_ceiling":
                median("rps", runs["bare"]) / median("rps", runs["ceiling" if args.same_message else "ceiling_minimal"]),
            "bare_p50_ms": median("p50_ms", runs["bare"]),
            "bare_p99_ms": median("p99_ms", runs["bare"]),
            "bare_cpu_ms_per_webhook": statistics.median(runs["bare_cpu"]),
            "bare_floor_cpu_ms_per_healthz": statistics.median(runs["bare_floor"]),
            "fair_webhooks_per_s": median("rps", runs["fair"]),
            "fair_p50_ms": median("p50_ms", runs["fair"]),
            "fair_p99_ms": median("p99_ms", runs["fair"]),
            "fair_cpu_ms_per_webhook": statistics.median(runs["fair_cpu"]),
            "fair_context_switches_per_webhook": median("switches", runs["fair"]),
            "bare_context_switches_per_webhook": median("switches", runs["bare"]),
            "fair_floor_cpu_ms_per_healthz": statistics.median(runs["fair_floor"]),
            # The FCM side's CPU per message in the fair floor's runs: it sends a minimal message, rc-relay its route's
            # silent-push message, and on this machine both share the cores with the emulator.
            "fair_emulator_cpu_ms_per_message": median("emulator_cpu_ms", runs["fair"]),
            # Run by run, to show the spread the medians hide (each pair measured a minute apart at most).
            "cpu_vs_fair_by_run": [round(a / b, 2) for a, b in zip(runs["cpu"], runs["fair_cpu"])],
            "throughput_vs_fair_by_run": [round(a["rps"] / b["rps"], 2) for a, b in zip(relay_runs, runs["fair"])],
            # Issue #35's targets: rc-relay in memory against the fair floor of the same runs.
            "throughput_vs_fair": median("rps", relay_runs) / median("rps", runs["fair"]),
            "cpu_vs_fair": statistics.median(runs["cpu"]) / statistics.median(runs["fair_cpu"]),
            "p99_vs_fair": median("p99_ms", relay_runs) / median("p99_ms", runs["fair"]),
        }
    if runs["flood"]:
        probes = sorted(runs["flood_probe"])
        figures |= {
            "flood_refusals_per_s": median("rps", runs["flood"]),
            "flood_cpu_ms_per_refusal": statistics.median(runs["flood_cpu"]),
            "flood_signed_webhooks": len(probes),
            "flood_signed_p50_ms": probes[len(probes) // 2] * 1000,
            "flood_signed_p99_ms": probes[min(len(probes) - 1, int(len(probes) * 0.99))] * 1000,
            "flood_log_bytes_per_refusal": median("log_bytes", runs["flood"]),
            "hostile_flood_refusals_per_s": median("rps", runs["hostile_flood"]),
            "hostile_flood_cpu_ms_per_refusal": statistics.median(runs["hostile_flood_cpu"]),
            "hostile_flood_log_bytes_per_refusal": median("log_bytes", runs["hostile_flood"]),
            "traced_flood_refusals_per_s": median("rps", runs["traced_flood"]),
            "traced_flood_cpu_ms_per_refusal": statistics.median(runs["traced_flood_cpu"]),
            "traced_flood_log_bytes_per_refusal": median("log_bytes", runs["traced_flood"]),
            "traced_flood_exported_bytes_per_refusal": statistics.median(runs["traced_export_bytes"]),
        }
        if runs["bare_flood"]:
            figures |= {
                "bare_flood_refusals_per_s": median("rps", runs["bare_flood"]),
                "bare_flood_cpu_ms_per_refusal": statistics.median(runs["bare_flood_cpu"]),
            }
    def store_figures(name):
        """The figures of a relay on the PostgreSQL cluster (`store`, `store_floor`), against rc-relay in memory."""
        results = runs[name]
        return {
            f"{name}_webhooks_per_s": median("rps", results),
            f"{name}_ratio_to_in_memory": median("rps", results) / median("rps", relay_runs),
            f"{name}_p50_ms": median("p50_ms", results),
            f"{name}_p99_ms": median("p99_ms", results),
            f"{name}_cpu_ms_per_webhook": statistics.median(runs[f"{name}_cpu"]),
            f"{name}_postgres_cpu_ms_per_webhook": statistics.median(runs[f"{name}_db_cpu"]),
            f"{name}_runs": [{"p99_ms": r["p99_ms"], "checkpoint": r["checkpoint"], "ratio_to_in_memory": r["rps"] / memory["rps"]}
                             for r, memory in zip(results, relay_runs)],
        }

    if runs["store"]:
        figures |= store_figures("store")
        for name in ("store", "store_floor"):
            if runs[name]:
                figures |= {f"{name}_{key}_per_webhook": median(key, runs[name]) for key in ("wal_bytes", "wal_records", "wal_fpi")}
                figures[f"{name}_checkpoints"] = sum(r["checkpoints"] for r in runs[name])
        if runs["store_floor"]:
            # Issue #50's targets: rc-relay on PostgreSQL against the store floor of the same runs.
            figures |= {
                "store_vs_floor": median("rps", runs["store"]) / median("rps", runs["store_floor"]),
                "store_p99_vs_floor": median("p99_ms", runs["store"]) / median("p99_ms", runs["store_floor"]),
                "store_postgres_cpu_vs_floor": statistics.median(runs["store_db_cpu"]) / statistics.median(runs["store_floor_db_cpu"]),
            }
    if runs["two_replicas"]:
        two = runs["two_replicas"]
        figures |= {
            "two_replicas_webhooks_per_s": median("rps", two), "two_replicas_requests_per_s": median("requests_per_s", two),
            "two_replicas_p99_ms": median("p99_ms", two), "two_replicas_leases": runs["two_replicas_leases"],
            "two_replicas_duplicates": sum(r["duplicates"] for r in two), "two_replicas_lost": sum(r["lost"] for r in two),
            "two_replicas_non2xx": sum(r["non2xx"] for r in two), "two_replicas_deadlocks": sum(r["deadlocks"] for r in two),
            "two_replicas_wal_bytes_per_webhook": median("wal_bytes", two),
            "two_replicas_postgres_cpu_ms_per_webhook": median("db_cpu_ms", two),
            "two_replicas_cpu_ms_per_webhook": median("cpu_ms", two),
        }
    if runs["store_floor"]:
        figures |= store_figures("store_floor")
        figures["store_floor_ratio_to_fair"] = median("rps", runs["store_floor"]) / median("rps", runs["fair"])
        for figure, r, fair in zip(figures["store_floor_runs"], runs["store_floor"], runs["fair"]):
            figure["ratio_to_fair"] = r["rps"] / fair["rps"]
    if args.idle_seconds:
        figures |= {"idle_wakeups_per_s": idle_wakeups, "idle_cpu_ticks": idle_ticks, "idle_cpu_ms": idle_cpu_ms,
                    "idle_seconds": args.idle_seconds}
        if floor_idle:
            figures |= {"fair_idle_wakeups_per_s": floor_idle[0], "fair_idle_cpu_ticks": floor_idle[1],
                        "fair_idle_cpu_ms": floor_idle[2]}
    machine = f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}"
    load = (f"webhooks spread over {args.projects} projects (CloudEvents, binary mode)" if args.projects > 1
            else "one project (bare versions)")
    print(f"\nrc-relay benchmark — {args.runs} runs × {args.duration} s, {args.connections} connections, medians; "
          f"{load}; {figures['transport']} to the emulator; {machine}\n")
    rows = [
        ("webhooks/s end to end", f"{figures['webhooks_per_s']:.0f}"),
        ("emulator ceiling, requests/s (rc-relay's message)", f"{figures['ceiling_per_s']:.0f}"),
        ("throughput ÷ ceiling", f"{figures['ratio_to_ceiling']:.2f}"),
        ("emulator ceiling, minimal message; ratio to it", f"{figures['ceiling_minimal_message_per_s']:.0f}; {figures['ratio_to_minimal_message_ceiling']:.2f}"),
        ("latency p50 / p99", f"{figures['p50_ms']:.2f} ms / {figures['p99_ms']:.2f} ms"),
        ("latency p50 / p99, one connection", f"{figures['p50_ms_one_connection']:.2f} ms / {figures['p99_ms_one_connection']:.2f} ms"),
        ("CPU per webhook", f"{figures['cpu_ms_per_webhook']:.3f} ms"),
        ("context switches per webhook, all threads", f"{figures['context_switches_per_webhook']:.2f}"),
        ("2xx whose ping stood down for a newer version FCM had accepted (no request)", f"{figures['superseded_share'] * 100:.1f} %"),
        ("emulator CPU per message, same runs", f"{figures['emulator_cpu_ms_per_message']:.3f} ms"),
        ("floor: CPU per GET /healthz, same load", f"{figures['floor_cpu_ms_per_healthz']:.3f} ms"),
        ("RSS idle / peak (target: peak ≤ 45 MB)",
         f"{figures['idle_rss_mb']:.1f} MB / {figures['peak_rss_mb']:.1f} MB {'✓' if figures['peak_rss_mb'] <= 45 else '✗'}"),
        ("RSS after the loads: anonymous / file-backed (code)",
         f"{figures['after_loads_anonymous_mb']:.1f} MB / {figures['after_loads_file_backed_mb']:.1f} MB"),
        ("start to first accepted webhook (target ≤ 60 ms)",
         f"{figures['start_to_first_webhook_ms']:.0f} ms {'✓' if figures['start_to_first_webhook_ms'] <= 60 else '✗'}"),
        ("fan-out, 1,000 routes at 50 ms", f"{figures['fanout_1000_s']:.2f} s (ideal {ideal:.2f} s, ×{figures['fanout_ratio']:.2f}); "
         f"{figures['fanout_connections']} connection(s), {figures['fanout_http2_sends']} HTTP/2 sends"),
    ]
    if runs["bare"]:
        rows += [
            ("bare relay: webhooks/s; ÷ the ceiling of its message", f"{figures['bare_webhooks_per_s']:.0f}; {figures['bare_ratio_to_its_message_ceiling']:.2f}"),
            ("bare relay: latency p50 / p99", f"{figures['bare_p50_ms']:.2f} ms / {figures['bare_p99_ms']:.2f} ms"),
            ("bare relay: CPU per webhook", f"{figures['bare_cpu_ms_per_webhook']:.3f} ms"),
            ("bare relay: CPU per GET /healthz", f"{figures['bare_floor_cpu_ms_per_healthz']:.3f} ms"),
            ("fair floor: webhooks/s", f"{figures['fair_webhooks_per_s']:.0f}"),
            ("fair floor: latency p50 / p99", f"{figures['fair_p50_ms']:.2f} ms / {figures['fair_p99_ms']:.2f} ms"),
            ("fair floor: CPU per webhook", f"{figures['fair_cpu_ms_per_webhook']:.3f} ms"),
            ("context switches per webhook: fair floor; bare relay",
             f"{figures['fair_context_switches_per_webhook']:.2f}; {figures['bare_context_switches_per_webhook']:.2f}"),
            ("fair floor: CPU per GET /healthz", f"{figures['fair_floor_cpu_ms_per_healthz']:.3f} ms"),
            (f"fair floor: emulator CPU per message ({'rc-relay' + chr(39) + 's message' if args.same_message else 'a minimal message'})",
             f"{figures['fair_emulator_cpu_ms_per_message']:.3f} ms"),
            ("rc-relay ÷ fair floor, run by run: throughput; CPU",
             f"{', '.join(map(str, figures['throughput_vs_fair_by_run']))}; {', '.join(map(str, figures['cpu_vs_fair_by_run']))}"),
            ("rc-relay ÷ fair floor: throughput (target ≥ 0.9)", mark(figures["throughput_vs_fair"], ">=", 0.9)),
            ("rc-relay ÷ fair floor: CPU per webhook (target ≤ 1.2)", mark(figures["cpu_vs_fair"], "<=", 1.2)),
            ("rc-relay ÷ fair floor: p99 (target ≤ 1.2)", mark(figures["p99_vs_fair"], "<=", 1.2)),
        ]
    if runs["flood"]:
        rows += [
            ("flood: refusals/s; CPU per refusal", f"{figures['flood_refusals_per_s']:.0f}; {figures['flood_cpu_ms_per_refusal']:.3f} ms"),
            ("flood: signed webhooks during it, p50 / p99",
             f"{figures['flood_signed_p50_ms']:.2f} ms / {figures['flood_signed_p99_ms']:.2f} ms ({figures['flood_signed_webhooks']} webhooks)"),
            ("flood: log bytes per refusal", f"{figures['flood_log_bytes_per_refusal']:.0f}"),
            ("flood with hostile trace context, tracing off: refusals/s; CPU per refusal; log bytes per refusal",
             f"{figures['hostile_flood_refusals_per_s']:.0f}; {figures['hostile_flood_cpu_ms_per_refusal']:.3f} ms; "
             f"{figures['hostile_flood_log_bytes_per_refusal']:.0f}"),
            ("flood, tracing on, hostile trace context: refusals/s; CPU per refusal",
             f"{figures['traced_flood_refusals_per_s']:.0f}; {figures['traced_flood_cpu_ms_per_refusal']:.3f} ms"),
            ("flood, tracing on: log bytes per refusal; bytes exported per refusal",
             f"{figures['traced_flood_log_bytes_per_refusal']:.0f}; {figures['traced_flood_exported_bytes_per_refusal']:.1f}"),
        ]
        if runs["bare_flood"]:
            rows += [("bare Hummingbird 401 route: refusals/s; CPU per refusal",
                      f"{figures['bare_flood_refusals_per_s']:.0f}; {figures['bare_flood_cpu_ms_per_refusal']:.3f} ms")]
    if runs["store"]:
        rows += [
            ("with PostgreSQL: webhooks/s; ÷ in-memory", f"{figures['store_webhooks_per_s']:.0f}; {figures['store_ratio_to_in_memory']:.2f}"),
            ("with PostgreSQL: latency p50 / p99", f"{figures['store_p50_ms']:.2f} ms / {figures['store_p99_ms']:.2f} ms"),
            ("with PostgreSQL: CPU per webhook, relay / PostgreSQL",
             f"{figures['store_cpu_ms_per_webhook']:.3f} ms / {figures['store_postgres_cpu_ms_per_webhook']:.3f} ms"),
            ("with PostgreSQL: each run's p99 (* a checkpoint under way; target ≤ 25)",
             ", ".join(f"{r['p99_ms']:.2f}{' *' if r['checkpoint'] else ''}" for r in figures["store_runs"]) + " ms"
             + (" ✓" if all(r["p99_ms"] <= 25 for r in figures["store_runs"]) else " ✗")),
            ("with PostgreSQL: each run's ÷ in-memory (target ≥ 0.6)",
             ", ".join(f"{r['ratio_to_in_memory']:.2f}" for r in figures["store_runs"])
             + (" ✓" if all(r["ratio_to_in_memory"] >= 0.6 for r in figures["store_runs"]) else " ✗")),
        ]
    if runs["store_floor"]:
        rows += [
            ("store floor (fair floor + PostgreSQL): webhooks/s; ÷ fair floor; ÷ rc-relay in memory",
             f"{figures['store_floor_webhooks_per_s']:.0f}; {figures['store_floor_ratio_to_fair']:.2f}; "
             f"{figures['store_floor_ratio_to_in_memory']:.2f}"),
            ("store floor: latency p50 / p99", f"{figures['store_floor_p50_ms']:.2f} ms / {figures['store_floor_p99_ms']:.2f} ms"),
            ("store floor: CPU per webhook, floor / PostgreSQL",
             f"{figures['store_floor_cpu_ms_per_webhook']:.3f} ms / {figures['store_floor_postgres_cpu_ms_per_webhook']:.3f} ms"),
            ("store floor, each run: ÷ fair floor; ÷ rc-relay in memory; p99 (* a checkpoint)",
             ", ".join(f"{r['ratio_to_fair']:.2f}" for r in figures["store_floor_runs"]) + "; "
             + ", ".join(f"{r['ratio_to_in_memory']:.2f}" for r in figures["store_floor_runs"]) + "; "
             + ", ".join(f"{r['p99_ms']:.2f}{' *' if r['checkpoint'] else ''}" for r in figures["store_floor_runs"]) + " ms"),
            ("rc-relay with PostgreSQL ÷ store floor, each run",
             ", ".join(f"{r['rps'] / floor['rps']:.2f}" for r, floor in zip(runs["store"], runs["store_floor"]))),
            ("rc-relay with PostgreSQL ÷ store floor: throughput (target ≥ 0.9)", mark(figures["store_vs_floor"], ">=", 0.9)),
            ("rc-relay with PostgreSQL ÷ store floor: p99 (target ≤ 1.2)", mark(figures["store_p99_vs_floor"], "<=", 1.2)),
            ("rc-relay with PostgreSQL ÷ store floor: PostgreSQL's CPU per webhook (target ≤ 1.5)",
             mark(figures["store_postgres_cpu_vs_floor"], "<=", 1.5)),
            ("store floor: WAL per webhook, bytes / records / full-page images",
             f"{figures['store_floor_wal_bytes_per_webhook']:.0f} / {figures['store_floor_wal_records_per_webhook']:.1f} / "
             f"{figures['store_floor_wal_fpi_per_webhook']:.3f}"),
        ]
    if runs["store"]:
        rows += [
            ("with PostgreSQL: WAL per webhook, bytes (target ≤ 1,536) / records / full-page images",
             f"{mark(figures['store_wal_bytes_per_webhook'], '<=', 1536)} / {figures['store_wal_records_per_webhook']:.1f} / "
             f"{figures['store_wal_fpi_per_webhook']:.3f}"),
            ("checkpoints begun during the store loads: rc-relay / store floor",
             f"{figures['store_checkpoints']} / {figures.get('store_floor_checkpoints', '-')}"),
        ]
    if runs["two_replicas"]:
        rows += [
            (f"two replicas (leases {bench_store.leases_line(figures['two_replicas_leases'])}), a fifth sent to both: "
             "distinct webhooks/s; requests/s", f"{figures['two_replicas_webhooks_per_s']:.0f}; {figures['two_replicas_requests_per_s']:.0f}"),
            ("two replicas: p99 (the slower replica's)", f"{figures['two_replicas_p99_ms']:.2f} ms"),
            ("two replicas: duplicates / lost / 5xx / deadlocks in PostgreSQL's log (target 0 each)",
             f"{figures['two_replicas_duplicates']} / {figures['two_replicas_lost']} / {figures['two_replicas_non2xx']} / "
             f"{figures['two_replicas_deadlocks']}"
             + (" ✓" if not any(figures[f"two_replicas_{k}"] for k in ("duplicates", "lost", "non2xx", "deadlocks")) else " ✗")),
            ("two replicas: WAL bytes and PostgreSQL CPU per distinct webhook; relays' CPU",
             f"{figures['two_replicas_wal_bytes_per_webhook']:.0f} B; {figures['two_replicas_postgres_cpu_ms_per_webhook']:.3f} ms; "
             f"{figures['two_replicas_cpu_ms_per_webhook']:.3f} ms"),
        ]
    if args.idle_seconds:
        rows += [(f"idle, {args.idle_seconds} s: wake-ups a second, all threads (target ≤ 2); CPU ticks (target 0); CPU time",
                  f"{mark(figures['idle_wakeups_per_s'], '<=', 2)}; {idle_ticks} {'✓' if idle_ticks == 0 else '✗'}; {idle_cpu_ms:.2f} ms")]
        if "fair_idle_wakeups_per_s" in figures:
            rows += [(f"fair floor: idle, {args.idle_seconds} s: wake-ups a second; CPU ticks; CPU time",
                      f"{figures['fair_idle_wakeups_per_s']:.2f}; {figures['fair_idle_cpu_ticks']}; {figures['fair_idle_cpu_ms']:.2f} ms")]
    if args.micro:
        figures["micro_ns"] = micro()
        rows += [(f"micro: {name}", f"{ns / 1000:.2f} µs") for name, ns in figures["micro_ns"].items()]
    width = max(len(r[0]) for r in rows)
    print(f"| {'figure'.ljust(width)} | value |\n|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")
    print("\n" + json.dumps({"benchmark": "rc-relay", "machine": machine, **figures}))


if __name__ == "__main__":
    sys.exit(main())
