"""The files in deploy/, for real: nginx and Caddy from Debian's packages in front of the rc-relay build the other
tests use (TLS with a throwaway certificate), then static checks that the systemd unit, the Kubernetes manifests, the
compose file, the Dockerfile, the Prometheus rules and the Grafana dashboard agree with the service and each other.

A tool that is not installed fails its test, naming the package to install (scripts/test installs them); a user who
leaves a package's tests out (`scripts/test --without nginx`) sees them skipped, and listed at the end of the run.
"""
import concurrent.futures
import datetime
import http.client
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time

import jsonschema
import pytest
import requests
import yaml
from requests.adapters import HTTPAdapter

from conftest import BINARY, ROOT, SECRET, recorded, require, signed_headers, start_relay, stop_relay
from postgres import free_port

DEPLOY = ROOT / "deploy"
SPEC = yaml.safe_load((ROOT / "openapi.yaml").read_text())
# What a stop may take beyond the shutdown delay and the drain (RelayProcess.stopMargin).
STOP_MARGIN = 3

# Every metric of docs/operations.md's table: the alert rules and the dashboard may use these names only (histograms with
# their _bucket, _sum and _count series), and a relay exports no other.
DOCUMENTED = set(re.findall(r"^\| `(rc_relay_\w+)` \|", (ROOT / "docs" / "operations.md").read_text(), re.M))
# The delivery metrics, which the dashboard shows every one of (deploy/README.md lists them).
METRICS = [
    "rc_relay_webhooks_received_total",
    "rc_relay_pings_total",
    "rc_relay_fcm_responses_total",
    "rc_relay_fcm_attempts_total",
    "rc_relay_fcm_retries_total",
    "rc_relay_dead_pings_total",
    "rc_relay_delivery_latency_seconds",
    "rc_relay_fcm_request_duration_seconds",
    "rc_relay_queue_depth",
    "rc_relay_token_refreshes_total",
    "rc_relay_ready",
    "rc_relay_undelivered_events",
    "rc_relay_spool_quarantined_total",
]

CLIENT = "127.0.0.7"  # the client's own loopback address, distinct from the proxy's 127.0.0.1
ADMIN_TOKEN = "deploy-test-admin-token-" + os.urandom(8).hex()
RELAY_EXTRA = f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN_TOKEN}"]}}
"""
RELAY_SERVER = '{port: 0, trustedProxies: ["127.0.0.1/32"]}'


# ---------------------------------------------------------------------------------------------------------------------
# Helpers


def tool(name, package):
    """The path of a program from Debian's `package`: missing, a failure naming the package; left out, a skip."""
    return require(package, name)


def wait_for_port(port, proc, log_file, seconds=15):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the proxy exited with {proc.returncode}:\n{log_file.read_text() if log_file.exists() else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}:\n{log_file.read_text() if log_file.exists() else ''}")


def make_certificate(directory):
    """A throwaway self-signed certificate for 127.0.0.1 and localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "proxy.crt", directory / "proxy.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    key_file.chmod(0o600)
    return cert_file, key_file


def substitute(text, edits, source):
    """Applies (old, new) edits, each of which must match exactly once, and checks that every line the shipped file
    marks `EDIT` is one of them (so the test runs the file as shipped, changed only where a user would change it)."""
    for line in text.splitlines():
        if "EDIT" in line and not line.lstrip().startswith("#") and not any(old.strip() in line for old, _ in edits):
            if "server_name" not in line:
                raise AssertionError(f"{source}: the EDIT line {line.strip()!r} is not substituted by the test")
    for old, new in edits:
        assert text.count(old) == 1, f"{source} no longer has exactly one {old!r}: update the file or this test"
        text = text.replace(old, new)
    return text


def render_nginx(tmp, upstream, port, cert, key, console=False, edits=()):
    optional = [("    # location ^~ /console/ { proxy_pass http://rc_relay; }", "    location ^~ /console/ { proxy_pass http://rc_relay; }")]
    conf = substitute((DEPLOY / "nginx" / "rc-relay.conf").read_text(), (optional if console else []) + list(edits) + [
        ("server 127.0.0.1:8080;", f"server {upstream};"),
        ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
        ("listen [::]:443 ssl;", ""),
        ("/etc/nginx/tls/rc-relay.crt", str(cert)),
        ("/etc/nginx/tls/rc-relay.key", str(key)),
        ("/var/log/nginx/rc-relay.access.log", str(tmp / "access.log")),
    ], "deploy/nginx/rc-relay.conf")
    (tmp / "rc-relay.conf").write_text(conf)
    for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (tmp / sub).mkdir(exist_ok=True)
    # What /etc/nginx/nginx.conf does around conf.d/, with every path in the test's directory.
    (tmp / "nginx.conf").write_text(f"""
{"user root;" if os.geteuid() == 0 else ""}
daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {tmp}/default-access.log;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    include {tmp}/rc-relay.conf;
}}
""")
    return tmp / "nginx.conf"


def render_caddy(tmp, upstream, port, cert, key):
    conf = substitute((DEPLOY / "caddy" / "Caddyfile").read_text(), [
        ("admin localhost:2019", "admin off"),
        ("http_port 80 ", f"auto_https disable_redirects\n\thttp_port {free_port()} "),
        ("https_port 443", f"https_port {port}"),
        ("\nrelay.example.com {", "\n127.0.0.1 {\n\tbind 127.0.0.1"),
        ("tls /etc/caddy/tls/rc-relay.crt /etc/caddy/tls/rc-relay.key", f"tls {cert} {key}"),
        ("/var/log/caddy/rc-relay.access.log", str(tmp / "access.log")),
        ("reverse_proxy 127.0.0.1:8080", f"reverse_proxy {upstream}"),
    ], "deploy/caddy/Caddyfile")
    (tmp / "Caddyfile").write_text(conf)
    return tmp / "Caddyfile"


def caddy_env(tmp):
    return {**os.environ, "HOME": str(tmp), "XDG_DATA_HOME": str(tmp / "data"), "XDG_CONFIG_HOME": str(tmp / "config")}


def start_proxy(kind, tmp, upstream, console=False, edits=()):
    tmp.mkdir(exist_ok=True)
    port = free_port()
    cert, key = make_certificate(tmp)
    log_file = tmp / "proxy.out"
    if kind == "nginx":
        nginx = tool("nginx", "nginx")
        conf = render_nginx(tmp, upstream, port, cert, key, console=console, edits=edits)
        args, env = [nginx, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")], None
        log_file = tmp / "error.log"
    else:
        caddy = tool("caddy", "caddy")
        conf = render_caddy(tmp, upstream, port, cert, key)
        args, env = [caddy, "run", "--adapter", "caddyfile", "--config", str(conf)], caddy_env(tmp)
    with open(tmp / "proxy.out", "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_port(port, proc, log_file)
    except AssertionError:
        proc.kill()
        raise
    return {"kind": kind, "proc": proc, "url": f"https://127.0.0.1:{port}", "cert": str(cert), "access_log": tmp / "access.log"}


def stop_proxy(proxy):
    proxy["proc"].terminate()
    try:
        proxy["proc"].wait(timeout=10)
    except subprocess.TimeoutExpired:
        proxy["proc"].kill()


class SourceAddress(HTTPAdapter):
    """Connects from a chosen local address, so the client is not the proxy's 127.0.0.1."""

    def __init__(self, source, **kwargs):
        self.source = source
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.source, 0)
        super().init_poolmanager(*args, **kwargs)


def client_session(verify=True):
    session = requests.Session()
    session.mount("https://", SourceAddress(CLIENT))
    session.mount("http://", SourceAddress(CLIENT))
    session.verify = verify
    session.trust_env = False  # REQUESTS_CA_BUNDLE would otherwise win over the throwaway certificate
    return session


def raw_get(proxy, path):
    """A GET with the path exactly as written (requests would normalise dot segments)."""
    context = ssl.create_default_context(cafile=proxy["cert"])
    port = int(proxy["url"].rsplit(":", 1)[1])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10, source_address=(CLIENT, 0))
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def log_records(relay):
    """rc-relay's JSON log lines, fields flattened (a nested `metadata` object is accepted too)."""
    records = []
    for line in list(relay["proc"].lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            if isinstance(record.get("metadata"), dict):
                record = {**record, **record["metadata"]}
            records.append(record)
    return records


def access_lines(relay, path=None):
    return [r for r in log_records(relay) if r.get("msg") == "request" and (path is None or r.get("path") == path)]


def wait_for_access_line(relay, request_id, seconds=10):
    deadline = time.time() + seconds
    while time.time() < deadline:
        for record in access_lines(relay):
            if record.get("request_id") == request_id:
                return record
        time.sleep(0.05)
    raise AssertionError(f"no access line (msg: request) with request_id {request_id} in the relay's log:\n{relay['proc'].output}")


def barrier(relay, base_url, session):
    """A request that reaches rc-relay, and its access line: everything sent before it has been logged by then."""
    request_id = "barrier-" + os.urandom(6).hex()
    assert session.get(base_url + "/healthz", headers={"X-Request-Id": request_id}, timeout=10).status_code == 200
    wait_for_access_line(relay, request_id)


def host_of(address):
    """The address without a port: '127.0.0.1:5000' -> '127.0.0.1', '[::1]:5000' -> '::1'."""
    address = str(address)
    if address.startswith("["):
        return address[1:].split("]")[0]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def version_body(version, size=None):
    body = {"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE", "updateOrigin": "REST_API", "description": ""}
    text = json.dumps(body)
    if size is not None:
        body["description"] = "x" * (size - len(text))
        text = json.dumps(body)
        assert len(text) == size
    return text.encode()


def post_webhook(session, url, body, **headers):
    return session.post(url + "/webhooks/remote-config", data=body,
                        headers={"content-type": "application/json", **signed_headers(body), **headers}, timeout=30)


# ---------------------------------------------------------------------------------------------------------------------
# End to end: client (127.0.0.7) -> nginx or Caddy (TLS) -> rc-relay (trusts 127.0.0.1) -> FCM emulator


@pytest.fixture(params=["nginx", "caddy"])
def stack(request, emulator, tmp_path):
    relay = start_relay(emulator, tmp_path, RELAY_EXTRA, server=RELAY_SERVER)
    try:
        proxy = start_proxy(request.param, tmp_path / request.param, relay["url"].removeprefix("http://"))
    except BaseException:
        stop_relay(relay)
        raise
    yield {"relay": relay, "proxy": proxy, "emulator": emulator, "session": client_session(verify=proxy["cert"])}
    stop_proxy(proxy)
    stop_relay(relay)


def test_signed_webhook_through_the_proxy_delivers_and_logs_the_real_client(stack):
    relay, proxy, session = stack["relay"], stack["proxy"], stack["session"]
    answer = post_webhook(session, proxy["url"], version_body(501), **{"X-Request-Id": "deploy-e2e-501"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "delivered"
    messages = recorded(stack["emulator"])
    assert [m["message"]["data"]["CONFIG_VERSION"] for m in messages] == ["501"]
    # The request id went through the proxy both ways.
    assert answer.headers.get("X-Request-Id") == "deploy-e2e-501"
    assert answer.json()["requestId"] == "deploy-e2e-501"
    line = wait_for_access_line(relay, "deploy-e2e-501")
    assert line["method"] == "POST" and line["path"] == "/webhooks/remote-config" and str(line["status"]) == "200"
    assert host_of(line["client"]) == CLIENT, line
    assert host_of(line["peer"]) == "127.0.0.1", line
    assert "duration_ms" in line


def test_the_proxy_makes_a_request_id_when_the_client_sends_none(stack):
    relay, proxy, session = stack["relay"], stack["proxy"], stack["session"]
    answer = post_webhook(session, proxy["url"], version_body(502))
    assert answer.status_code == 200, answer.text
    request_id = answer.headers.get("X-Request-Id")
    assert request_id and answer.json()["requestId"] == request_id
    assert host_of(wait_for_access_line(relay, request_id)["client"]) == CLIENT


def test_a_forged_forwarded_for_is_not_believed(stack):
    relay, proxy, session = stack["relay"], stack["proxy"], stack["session"]
    forged = {"X-Forwarded-For": "10.9.9.9", "X-Request-Id": "deploy-forged-1"}
    assert session.get(proxy["url"] + "/healthz", headers=forged, timeout=10).status_code == 200
    assert host_of(wait_for_access_line(relay, "deploy-forged-1")["client"]) == CLIENT
    # Straight to rc-relay from an address it does not trust: the header is ignored altogether.
    forged["X-Request-Id"] = "deploy-forged-2"
    assert session.get(relay["url"] + "/healthz", headers=forged, timeout=10).status_code == 200
    line = wait_for_access_line(relay, "deploy-forged-2")
    assert host_of(line["client"]) == CLIENT and host_of(line["peer"]) == CLIENT, line


def test_an_oversized_body_is_refused_by_the_proxy(stack):
    relay, proxy, session = stack["relay"], stack["proxy"], stack["session"]
    for size in (65537, 100 * 1024):
        answer = post_webhook(session, proxy["url"], version_body(503, size=size))
        assert answer.status_code == 413, (size, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        # The relay's own answer, as openapi.yaml describes it: a caller cannot tell which of the two refused.
        problem = answer.json()
        jsonschema.validate(problem, {**SPEC["components"]["schemas"]["Problem"], "components": SPEC["components"]}, cls=jsonschema.Draft202012Validator)
        assert problem["type"] == "urn:rc-relay:problem:body-too-large"
        assert problem["title"] == "The request body is larger than allowed" and problem["status"] == 413
        assert problem["requestId"]
    barrier(relay, proxy["url"], session)
    assert access_lines(relay, "/webhooks/remote-config") == [], "an oversized body reached rc-relay"
    assert recorded(stack["emulator"]) == []
    # The proxy's limit is rc-relay's (server.maxBodyBytes, 65536), not lower: a body of exactly that size is delivered.
    answer = post_webhook(session, proxy["url"], version_body(504, size=65536))
    assert answer.status_code == 200, answer.text
    assert [m["message"]["data"]["CONFIG_VERSION"] for m in recorded(stack["emulator"])] == ["504"]


ADMIN_PATHS = ["/admin/info", "/admin/", "/admin", "/metrics", "/%61dmin/info", "/webhooks/../admin/info", "//admin/info", "/metrics/",
               "/console", "/console/sign-in", "/%63onsole/sign-in"]


def test_admin_console_and_metrics_are_not_reachable_through_the_proxy(stack):
    relay, proxy, session = stack["relay"], stack["proxy"], stack["session"]
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    # Straight to rc-relay (the main listener serves both here), they answer; so a 404 below is the proxy's doing.
    direct = requests.get(relay["url"] + "/admin/info", headers=auth, timeout=10)
    assert direct.status_code == 200, direct.text
    assert requests.get(relay["url"] + "/metrics", timeout=10).status_code == 200
    assert requests.get(relay["url"] + "/console/sign-in", timeout=10).status_code == 200
    barrier(relay, proxy["url"], session)
    before = len(access_lines(relay))
    for path in ADMIN_PATHS:
        assert raw_get(proxy, path) == 404, path
    barrier(relay, proxy["url"], session)
    forwarded = [line for line in access_lines(relay)[before:] if any(word in line.get("path", "") for word in ["admin", "metrics", "console"])]
    assert forwarded == [], f"the proxy forwarded {forwarded}"


def test_probes_answer_through_the_proxy(stack):
    proxy, session = stack["proxy"], stack["session"]
    health = session.get(proxy["url"] + "/healthz", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok", health.text
    ready = session.get(proxy["url"] + "/readyz", timeout=10)
    assert ready.status_code == 200, ready.text


def test_nginx_rate_limits_the_webhook(emulator, tmp_path):
    """Stock Caddy has no rate limiting (its Caddyfile says how to add it); nginx's is checked here."""
    relay = start_relay(emulator, tmp_path, RELAY_EXTRA, server=RELAY_SERVER)
    try:
        proxy = start_proxy("nginx", tmp_path / "nginx", relay["url"].removeprefix("http://"))
    except BaseException:  # a skip too (nginx not installed): the relay must not outlive the test
        stop_relay(relay)
        raise
    try:
        # 300 requests from 32 clients at once: however slow the machine, far more arrive than the burst of 50 plus
        # the 10/s that refill while they do, so some are limited whatever the timing; all of the burst gets through.
        local = threading.local()

        def send(_):
            if not hasattr(local, "session"):
                local.session = client_session(verify=proxy["cert"])
            return local.session.post(proxy["url"] + "/webhooks/remote-config", data=b"{}", headers={"content-type": "application/json"}, timeout=30)

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            answers = list(pool.map(send, range(300)))
        elapsed = time.monotonic() - started
        statuses = [answer.status_code for answer in answers]
        assert set(statuses) <= {401, 429}, statuses  # unsigned: rc-relay answers 401 to each one that gets through
        assert statuses.count(401) >= 50, f"the burst of 50 was not allowed: {statuses}"
        # rate=10r/s, burst=50 nodelay: nginx lets the first request and the burst through at once, then one per 0.1 s.
        # No more got through than that allows in the time all of them took (measured around them, so at least nginx's
        # own span; one more for nginx's cached millisecond clock).
        assert statuses.count(401) <= 51 + 10 * elapsed + 1, f"more got through than the limit allows in {elapsed:.1f} s: {statuses}"
        limited = [answer for answer in answers if answer.status_code == 429]
        assert limited, f"none was limited: {statuses}"
        for answer in limited:
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert answer.headers.get("Retry-After")
    finally:
        stop_proxy(proxy)
        stop_relay(relay)


def test_the_exported_metrics_are_the_documented_ones(emulator, tmp_path):
    relay = start_relay(emulator, tmp_path, RELAY_EXTRA, server=RELAY_SERVER)
    try:
        assert post_webhook(requests, relay["url"], version_body(505)).status_code == 200
        assert requests.get(relay["url"] + "/readyz", timeout=10).status_code == 200
        text = requests.get(relay["url"] + "/metrics", timeout=10).text
    finally:
        stop_relay(relay)
    exported = set(re.findall(r"^# TYPE (\S+)", text, re.M)) | {
        re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"^(rc_relay_\w+)", text, re.M)}
    exported = {name for name in exported if name.startswith("rc_relay_")}
    assert exported - DOCUMENTED == set(), "exported but not in docs/operations.md's table"
    assert set(METRICS) <= DOCUMENTED, set(METRICS) - DOCUMENTED
    for name in ["rc_relay_webhooks_received_total", "rc_relay_pings_total", "rc_relay_fcm_responses_total",
                 "rc_relay_fcm_attempts_total", "rc_relay_delivery_latency_seconds", "rc_relay_fcm_request_duration_seconds",
                 "rc_relay_token_refreshes_total", "rc_relay_ready", "rc_relay_queue_depth"]:
        assert name in exported, f"{name} missing after a delivered webhook:\n{text}"


def dockerfile_healthcheck():
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK\b.*?\bCMD\s+(\[.*\])\s*$", text, re.M)
    assert match, "deploy/Dockerfile has no exec-form HEALTHCHECK"
    return json.loads(match.group(1))


def compose_file():
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_the_container_healthchecks_work_against_the_relay(emulator, tmp_path):
    """The image has no curl: its HEALTHCHECK (and compose's) talk HTTP from bash. Run them for real."""
    bash = shutil.which("bash")
    relay = start_relay(emulator, tmp_path, RELAY_EXTRA, server=RELAY_SERVER)
    try:
        port = relay["url"].rsplit(":", 1)[1]
        image_check = dockerfile_healthcheck()
        assert image_check[0] == "bash"
        run = lambda argv, env: subprocess.run([bash, *argv[1:]], env={**os.environ, **env}, timeout=10, capture_output=True)
        assert run(image_check, {"RC_RELAY_PORT": port}).returncode == 0
        assert run(image_check, {"RC_RELAY_PORT": str(free_port())}).returncode != 0
        compose_check = compose_file()["services"]["rc-relay"]["healthcheck"]["test"]
        assert compose_check[:2] == ["CMD", "bash"]
        assert "/8080" in compose_check[-1]
        patched = [c.replace("/8080", f"/{port}") for c in compose_check[1:]]
        assert run(patched, {}).returncode == 0
    finally:
        stop_relay(relay)


def test_the_shipped_configurations_pass_check_config(emulator, tmp_path):
    """Every rc-relay configuration in deploy/ is valid, with its secrets and key supplied as a deployment would."""
    secrets = tmp_path / "credentials"
    secrets.mkdir()
    (secrets / "webhook-secret").write_text(SECRET + "\n")
    (secrets / "admin-token").write_text(ADMIN_TOKEN + "\n")
    k8s_config = next(d for d in k8s_documents() if d["kind"] == "ConfigMap")["data"]["rc-relay.yaml"]
    configs = {
        "rc-relay.example.yaml": (DEPLOY / "rc-relay.example.yaml").read_text(),
        "compose/rc-relay.yaml": (DEPLOY / "compose" / "rc-relay.yaml").read_text(),
        "systemd/rc-relay.yaml": (DEPLOY / "systemd" / "rc-relay.yaml").read_text().replace("/run/credentials/rc-relay.service", str(secrets)),
        "kubernetes ConfigMap": k8s_config,
    }
    env = {**os.environ, "RC_RELAY_WEBHOOK_SECRET": SECRET, "RC_RELAY_ADMIN_TOKEN": ADMIN_TOKEN,
           "RC_RELAY_FCM_CREDENTIALS_FILE": str(emulator["key_file"]), "RC_RELAY_DELIVERY_SPOOL_DIRECTORY": str(tmp_path / "spool")}
    for name, text in configs.items():
        path = tmp_path / (name.replace("/", "-").replace(" ", "-") + ".yaml")
        path.write_text(text)
        # A configuration with a shared store has its outbox there instead of a spool.
        uses_store = "store" in yaml.safe_load(text)
        checked = {k: v for k, v in env.items() if not (uses_store and k == "RC_RELAY_DELIVERY_SPOOL_DIRECTORY")}
        if uses_store:
            checked["RC_RELAY_STORE_POSTGRES_PASSWORD"] = "a-password-for-the-check"
        result = subprocess.run([BINARY, "check-config", str(path)], env=checked, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, f"{name}: {result.stderr}"


# ---------------------------------------------------------------------------------------------------------------------
# Static checks: the configurations pass their own tools, and agree with the service and each other


def test_nginx_configuration_passes_nginx_t(tmp_path):
    nginx = tool("nginx", "nginx")
    cert, key = make_certificate(tmp_path)
    conf = render_nginx(tmp_path, "127.0.0.1:8080", free_port(), cert, key)
    result = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(conf), "-e", str(tmp_path / "error.log")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "[warn]" not in result.stderr and "[emerg]" not in result.stderr, result.stderr


def test_nginx_configuration_matches_the_service():
    conf = (DEPLOY / "nginx" / "rc-relay.conf").read_text()
    assert re.search(r"^\s*client_max_body_size 64k;", conf, re.M)  # server.maxBodyBytes: 65536
    for header in ["X-Forwarded-For $proxy_add_x_forwarded_for", "X-Forwarded-Proto $scheme", "X-Request-Id $rc_relay_request_id"]:
        assert f"proxy_set_header {header};" in conf
    # proxy_set_header inside a location would silently drop the server-level ones.
    for block in re.findall(r"location[^{]*\{([^}]*)\}", conf):
        assert "proxy_set_header" not in block
    forwarded = re.findall(r"location\s+=\s+(\S+)\s*\{[^}]*proxy_pass", conf)
    assert sorted(forwarded) == ["/healthz", "/pubsub/remote-config", "/readyz", "/webhooks/remote-config"]
    assert re.search(r"location\s+=\s+/webhooks/remote-config\s*\{[^}]*limit_req zone=rc_relay_webhooks burst=\d+", conf)
    assert re.search(r"location\s+/\s*\{\s*return 404;", conf)


def test_caddyfile_validates_and_is_formatted(tmp_path):
    caddy = tool("caddy", "caddy")
    cert, key = make_certificate(tmp_path)
    conf = render_caddy(tmp_path, "127.0.0.1:8080", free_port(), cert, key)
    result = subprocess.run([caddy, "validate", "--adapter", "caddyfile", "--config", str(conf)],
                            capture_output=True, text=True, timeout=60, env=caddy_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    shipped = (DEPLOY / "caddy" / "Caddyfile").read_text()
    formatted = subprocess.run([caddy, "fmt", str(DEPLOY / "caddy" / "Caddyfile")], capture_output=True, text=True, timeout=30)
    assert formatted.stdout == shipped, "deploy/caddy/Caddyfile is not as `caddy fmt` writes it"
    assert "max_size 64KiB" in shipped


def systemd_unit():
    """The unit as {section: [(key, value)]}."""
    sections, current = {}, None
    for raw in (DEPLOY / "systemd" / "rc-relay.service").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
        else:
            key, _, value = line.partition("=")
            current.append((key.strip(), value.strip()))
    return sections


def seconds(text):
    match = re.fullmatch(r"(\d+)\s*(s|sec|min)?", text.strip())
    assert match, text
    return int(match.group(1)) * (60 if match.group(2) == "min" else 1)


def test_systemd_unit_verifies(tmp_path):
    analyze = tool("systemd-analyze", "systemd")
    unit = (DEPLOY / "systemd" / "rc-relay.service").read_text()
    # verify checks that ExecStart's program exists: point it at one that does (the unit's own name and arguments).
    program = tmp_path / "rc-relay"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    assert unit.count("/usr/local/bin/rc-relay serve") == 1
    copy = tmp_path / "rc-relay.service"
    copy.write_text(unit.replace("/usr/local/bin/rc-relay serve", f"{program} serve"))
    result = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr
    # The hardening is worth something: systemd's own exposure score stays in its "OK" band (at most 2.0 of 10).
    security = subprocess.run([analyze, "security", "--offline=yes", "--threshold=20", str(copy)], capture_output=True, text=True, timeout=60)
    assert security.returncode == 0, security.stdout[-2000:] + security.stderr


def test_systemd_unit_matches_the_service():
    service = dict(systemd_unit()["Service"])
    every = systemd_unit()["Service"]
    config = yaml.safe_load((DEPLOY / "systemd" / "rc-relay.yaml").read_text())
    assert service["Type"] in ("exec", "simple")  # no sd_notify: readiness is /readyz
    for key, value in {"DynamicUser": "yes", "ProtectSystem": "strict", "NoNewPrivileges": "yes", "Restart": "on-failure",
                       "StateDirectory": "rc-relay", "RestartPreventExitStatus": "78"}.items():
        assert service.get(key) == value, key
    assert service["ExecStart"] == "/usr/local/bin/rc-relay serve --config /etc/rc-relay/rc-relay.yaml"
    # The stop timeout covers the listener delay and the drain.
    delay = config["server"].get("shutdownDelaySeconds", 0)
    assert seconds(service["TimeoutStopSec"]) > delay + config["delivery"]["drainSeconds"] + STOP_MARGIN
    # The spool is in the state directory, the only place the service may write.
    assert config["delivery"]["spoolDirectory"].startswith("/var/lib/rc-relay/")
    # Every credential file the configuration reads is one the unit loads.
    loaded = {value.split(":", 1)[0] for key, value in every if key == "LoadCredential"}
    used = set(re.findall(r"/run/credentials/rc-relay\.service/([\w.-]+)", (DEPLOY / "systemd" / "rc-relay.yaml").read_text()))
    used |= {m for key, value in every if key == "Environment" for m in re.findall(r"%d/([\w.-]+)", value)}
    assert used and used <= loaded, (used, loaded)
    # Behind a proxy on the same host: loopback only, and the proxy trusted.
    assert config["server"]["host"] == "127.0.0.1" and config["server"]["trustedProxies"] == ["127.0.0.1/32"]
    assert config["admin"]["host"] == "127.0.0.1"
    nginx = (DEPLOY / "nginx" / "rc-relay.conf").read_text()
    assert f"server {config['server']['host']}:{config['server']['port']};" in nginx
    env_file = (DEPLOY / "systemd" / "rc-relay.env").read_text()
    for name in re.findall(r"^#?\s*(RC_RELAY_\w+)=", env_file, re.M):
        assert name in (ROOT / "docs" / "configuration.md").read_text(), f"{name} in rc-relay.env is not a documented variable"


def k8s_documents():
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                document["__file__"] = path.name
                documents.append(document)
    return documents


def test_kubernetes_manifests_are_valid():
    import kubernetes_validate

    documents = k8s_documents()
    kinds = {d["kind"] for d in documents}
    assert {"Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget", "HorizontalPodAutoscaler", "Ingress"} <= kinds
    for document in documents:
        if document["kind"] == "Kustomization":
            continue
        resource = {k: v for k, v in document.items() if k != "__file__"}
        for version in (kubernetes_validate.latest_version(), "1.27.0"):
            kubernetes_validate.validate(resource, version, strict=True)
    kustomization = next(d for d in documents if d["kind"] == "Kustomization")
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in (DEPLOY / "kubernetes").glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert listed == on_disk, "kustomization.yaml lists every manifest but the example Secret"


def test_the_kubernetes_postgres_overlay_gives_the_store_from_its_secret(emulator, tmp_path):
    overlay = DEPLOY / "kubernetes" / "postgres"
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    assert kustomization["resources"] == [".."]
    (patch_path,) = [p["path"] for p in kustomization["patches"]]
    patch = yaml.safe_load((overlay / patch_path).read_text())
    base = next(d for d in k8s_documents() if d["kind"] == "Deployment")
    assert (patch["kind"], patch["metadata"]["name"]) == ("Deployment", base["metadata"]["name"])
    (container,) = patch["spec"]["template"]["spec"]["containers"]
    assert container["name"] in [c["name"] for c in base["spec"]["template"]["spec"]["containers"]]
    secret = yaml.safe_load((overlay / "postgres-secret.example.yaml").read_text())
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert set(env) == {"RC_RELAY_STORE_POSTGRES_URL", "RC_RELAY_STORE_POSTGRES_PASSWORD"}
    for reference in env.values():
        assert reference["name"] == secret["metadata"]["name"] and reference["key"] in secret["stringData"]
    # Each variable is one the relay reads (docs/configuration.md's table is generated from the same list).
    documented = (ROOT / "docs" / "configuration.md").read_text()
    for name in env:
        assert f"| `{name}` |" in documented
    # The ConfigMap with the overlay's variables (the example URL, its placeholder filled in) is a valid configuration.
    config = tmp_path / "rc-relay.yaml"
    config.write_text(next(d for d in k8s_documents() if d["kind"] == "ConfigMap")["data"]["rc-relay.yaml"])
    env = {**os.environ, "RC_RELAY_WEBHOOK_SECRET": SECRET, "RC_RELAY_ADMIN_TOKEN": ADMIN_TOKEN,
           "RC_RELAY_FCM_CREDENTIALS_FILE": str(emulator["key_file"]),
           "RC_RELAY_STORE_POSTGRES_URL": secret["stringData"]["url"].replace("REPLACE_WITH_THE_DATABASE_HOST", "10.20.0.3"),
           "RC_RELAY_STORE_POSTGRES_PASSWORD": "a-password-for-the-check"}
    result = subprocess.run([BINARY, "check-config", str(config)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    env["RC_RELAY_STORE_POSTGRES_URL"] = "mysql://not-postgres/rc_relay"
    refused = subprocess.run([BINARY, "check-config", str(config)], env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "store.postgres.url" in refused.stderr


def test_kubernetes_manifests_match_the_service():
    documents = k8s_documents()
    by_kind = lambda kind: [d for d in documents if d["kind"] == kind]
    (deployment,), (service,), (configmap,), (secret,) = by_kind("Deployment"), by_kind("Service"), by_kind("ConfigMap"), by_kind("Secret")
    (pdb,), (hpa,), (ingress,) = by_kind("PodDisruptionBudget"), by_kind("HorizontalPodAutoscaler"), by_kind("Ingress")
    config = yaml.safe_load(configmap["data"]["rc-relay.yaml"])
    pod = deployment["spec"]["template"]
    spec = pod["spec"]
    (container,) = spec["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # Ports: the main listener and the admin one, as configured.
    assert ports["http"] == config["server"]["port"]
    assert ports["admin"] == config["admin"]["port"] and config["admin"]["port"] != config["server"]["port"]
    assert config["server"]["host"] == "0.0.0.0" and config["admin"]["host"] == "0.0.0.0"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(config["admin"]["port"])
    assert pod["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    assert config["server"]["trustedProxies"], "behind an ingress controller, its address range must be trusted"
    # Probes.
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    # Stopping: the grace period covers the listener delay and the drain.
    delay = config["server"].get("shutdownDelaySeconds", 0)
    # The replicas may be given a shared store (the ConfigMap says how): its hand-over takes at most 5 s more.
    assert spec["terminationGracePeriodSeconds"] > delay + config["delivery"]["drainSeconds"] + 5 + STOP_MARGIN
    # The configuration is mounted where the container reads it.
    args = container["args"]
    config_path = args[args.index("--config") + 1]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    config_volume = next(name for name, v in volumes.items() if v.get("configMap", {}).get("name") == configmap["metadata"]["name"])
    assert config_path == mounts[config_volume]["mountPath"] + "/rc-relay.yaml"
    assert "rc-relay.yaml" in configmap["data"]
    # Secrets: every key referenced exists in the example Secret, and files land where the configuration reads them.
    secret_keys = set(secret["stringData"])
    for env in container["env"]:
        ref = env.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret_keys, ref
    secret_volume = next(name for name, v in volumes.items() if "secret" in v)
    assert volumes[secret_volume]["secret"]["secretName"] == secret["metadata"]["name"]
    for item in volumes[secret_volume]["secret"]["items"]:
        assert item["key"] in secret_keys
    files = {mounts[secret_volume]["mountPath"] + "/" + item["path"] for item in volumes[secret_volume]["secret"]["items"]}
    assert config["fcm"]["credentialsFile"] in files
    env_names = {e["name"] for e in container["env"]}
    for entry in config["webhook"]["secrets"] + config["admin"].get("tokens", []):
        if isinstance(entry, dict) and "env" in entry:
            assert entry["env"] in env_names, entry
    # Security context.
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert str(spec["securityContext"]["runAsUser"]) == dockerfile_user(), "the pod's user is the image's"
    assert "memory" in container["resources"]["limits"] and "cpu" in container["resources"]["requests"]
    # Selectors agree.
    labels = pod["metadata"]["labels"]
    for selector in (deployment["spec"]["selector"]["matchLabels"], service["spec"]["selector"], pdb["spec"]["selector"]["matchLabels"]):
        assert selector.items() <= labels.items()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
    assert hpa["spec"]["minReplicas"] >= 2 and deployment["spec"]["replicas"] >= 2
    # The Service exposes the main port only; the Ingress only the public paths, with rc-relay's body limit.
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    paths = [p for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]]
    assert {p["path"] for p in paths} <= {"/webhooks/remote-config", "/pubsub/remote-config", "/healthz", "/readyz"}
    assert all(p["pathType"] == "Exact" for p in paths)
    assert all(p["backend"]["service"] == {"name": service["metadata"]["name"], "port": {"name": "http"}} for p in paths)
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"] == "64k"
    assert config["server"].get("maxBodyBytes", 65536) == 65536


def test_compose_file_is_valid_and_matches_the_service(tmp_path):
    # The Compose Specification's schema, as check-jsonschema ships it (no Docker engine or compose plugin here).
    result = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(DEPLOY / "compose.yaml")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    compose = compose_file()
    services = compose["services"]
    relay, emulator, nginx = services["rc-relay"], services["fcm-emulator"], services["nginx"]
    config = yaml.safe_load((DEPLOY / "compose" / "rc-relay.yaml").read_text())
    port = config["server"]["port"]
    # The public side is nginx alone; rc-relay's port is not published, its admin port only on the host's loopback.
    published = [str(p) for p in relay.get("ports", [])]
    assert all(p.startswith("127.0.0.1:") for p in published), published
    assert not any(p.endswith(f":{port}") for p in published)
    assert [str(p) for p in nginx["ports"]] == ["8443:443"]
    # The health check asks /healthz on the configured port.
    assert f"/dev/tcp/127.0.0.1/{port}" in relay["healthcheck"]["test"][-1] and "/healthz" in relay["healthcheck"]["test"][-1]
    # The grace period covers the listener delay and the drain.
    delay = config["server"].get("shutdownDelaySeconds", 0)
    assert seconds(relay["stop_grace_period"]) > delay + config["delivery"]["drainSeconds"] + STOP_MARGIN
    # nginx runs the shipped configuration, changed by sed; each expression still applies, and the result points at
    # the rc-relay service on its configured port, with IPv6 listening removed.
    shipped = (DEPLOY / "nginx" / "rc-relay.conf").read_text()
    expressions = [arg for flag, arg in zip(nginx["command"][::2], nginx["command"][1::2]) if flag == "-e"]
    assert len(expressions) * 2 == len(nginx["command"])
    text = shipped
    for expression in expressions:
        changed = subprocess.run(["sed", "-e", expression], input=text, capture_output=True, text=True, check=True).stdout
        assert changed != text, f"sed {expression!r} no longer changes deploy/nginx/rc-relay.conf"
        text = changed
    assert f"server rc-relay:{port};" in text and "listen [::]" not in text
    assert any(v.endswith(":/etc/nginx/rc-relay.conf.in:ro") and v.startswith("./nginx/rc-relay.conf") for v in nginx["volumes"])
    # nginx's fixed address is the one rc-relay trusts, and nothing else is.
    address = nginx["networks"]["relay"]["ipv4_address"]
    subnet = compose["networks"]["relay"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(address) in ipaddress.ip_network(subnet)
    assert config["server"]["trustedProxies"] == [f"{address}/32"]
    # The emulator: its address is rc-relay's FCM base URL; the key file it writes is the one rc-relay reads.
    command = emulator["command"]
    emulator_url = f"http://{command[command.index('--host') + 1]}:{command[command.index('--port') + 1]}"
    assert config["fcm"]["baseURL"] == emulator_url
    key_path = command[command.index("--key-file") + 1]
    (volume, mount), = [v.split(":")[:2] for v in emulator["volumes"]]
    relay_mount = next(v.split(":")[1] for v in relay["volumes"] if v.split(":")[0] == volume)
    assert config["fcm"]["credentialsFile"] == relay_mount + key_path.removeprefix(mount)
    assert relay["volumes"][0].split(":")[1] == relay["command"][relay["command"].index("--config") + 1]
    for entry in config["webhook"]["secrets"]:
        assert entry["env"] in relay["environment"]
    # Two replicas on one PostgreSQL: both behind nginx, both with the database's password, the second unpublished.
    second, postgres = services["rc-relay-2"], services["postgres"]
    assert f"server rc-relay-2:{port};" in text
    assert second["command"] == relay["command"] and second["volumes"] == relay["volumes"]
    assert second.get("ports") == []
    url = config["store"]["postgres"]["url"]
    assert url.startswith(f"postgres://{postgres['environment']['POSTGRES_USER']}@postgres:5432/{postgres['environment']['POSTGRES_DB']}?")
    for replica in (relay, second):
        assert replica["environment"]["RC_RELAY_STORE_POSTGRES_PASSWORD"] == postgres["environment"]["POSTGRES_PASSWORD"]
        assert replica["depends_on"]["postgres"] == {"condition": "service_healthy"}


def dockerfile_user():
    users = re.findall(r"^USER\s+(\S+)", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert users, "the Dockerfile sets no USER"
    return users[-1].split(":")[0]


def test_dockerfile_builds_what_the_readme_says():
    """No Docker engine here: the Dockerfile is checked by reading it."""
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", text, re.M)
    assert len(stages) >= 2, "multi-stage"
    assert re.search(r"swift build -c release --static-swift-stdlib", text)
    assert "libz-dev" in text and "zlib1g" in text and "ca-certificates" in text
    assert "--no-install-recommends" in text
    assert re.search(r"^COPY --from=build\b", text, re.M)
    user = dockerfile_user()
    assert user not in ("root", "0") and int(user) >= 1000
    assert re.search(r"^EXPOSE 8080$", text, re.M)
    check = dockerfile_healthcheck()
    assert "/healthz" in check[-1] and "${RC_RELAY_PORT:-8080}" in check[-1]
    assert re.search(r"RC_RELAY_CONFIG=/etc/rc-relay/rc-relay.yaml", text) and re.search(r"RC_RELAY_HOST=0.0.0.0", text)
    assert re.search(r'^ENTRYPOINT \["/usr/local/bin/rc-relay"\]', text, re.M)
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert ".build" in ignore and ".git" in ignore


def test_the_image_ships_a_stripped_binary_whose_symbols_can_be_fetched(tmp_path):
    """The Dockerfile's strip step, run as written on this checkout's binary: the result runs, has no symbol table and
    names its debug file; the debug file has the symbols; the debug-symbols stage exports only that file."""
    text = (DEPLOY / "Dockerfile").read_text()
    steps = re.search(r"^RUN (objcopy --only-keep-debug .*?)(?<!\\)\n", text, re.M | re.S)
    assert steps, "the Dockerfile has no strip step"
    for program, package in (("objcopy", "binutils"), ("strip", "binutils"), ("readelf", "binutils")):
        tool(program, package)
    shutil.copy(BINARY, tmp_path / "rc-relay")
    command = steps.group(1).replace("\\\n", " ").replace("/out/", f"{tmp_path}/")
    subprocess.run(["bash", "-c", command], check=True, timeout=300)
    stripped, debug = tmp_path / "rc-relay", tmp_path / "rc-relay.debug"
    assert stripped.stat().st_size < os.path.getsize(BINARY) * 0.75  # a debug build: 174 MB to 94 MB; a release one 131 to 33
    def readelf(*args):
        return subprocess.run(["readelf", *args], capture_output=True, check=True).stdout.decode(errors="replace")

    sections = readelf("-S", "-W", str(stripped))
    assert ".gnu_debuglink" in sections and ".symtab" not in sections and ".debug_info" not in sections
    link = readelf("-p", ".gnu_debuglink", str(stripped))  # the name, then a CRC that is not text
    assert "rc-relay.debug" in link
    symbols = readelf("-S", "-W", str(debug))
    assert ".symtab" in symbols and ".debug_info" in symbols
    ran = subprocess.run([str(stripped), "check-config", "--help"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and "check-config" in ran.stdout
    stage = re.search(r"^FROM scratch AS debug-symbols\n(.*?)(?:\n\n|\Z)", text, re.M | re.S)
    assert stage and stage.group(1).strip() == "COPY --from=build /out/rc-relay.debug /"
    # The runtime image is the last stage, and takes the stripped binary.
    assert re.findall(r"^FROM\s+(\S+)", text, re.M)[-1] == "${RUNTIME_IMAGE}"
    assert re.search(r"^COPY --from=build /out/rc-relay /usr/local/bin/rc-relay$", text, re.M)


def referenced_metrics(expressions):
    names = set()
    for expression in expressions:
        for name in re.findall(r"\b(rc_relay_[a-z_]+)", expression):
            names.add(re.sub(r"_(bucket|sum|count)$", "", name))
    return names


def test_prometheus_rules_check_and_pass_their_tests():
    promtool = tool("promtool", "prometheus")
    for args in (["check", "rules", "alerts.yaml"], ["test", "rules", "alerts.test.yaml"]):
        result = subprocess.run([promtool, *args], cwd=DEPLOY / "prometheus", capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_rules_use_exported_metrics_only():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    alerts = {r["alert"]: r for group in rules["groups"] for r in group["rules"]}
    assert {"RcRelayDeadPings", "RcRelayFcmErrors", "RcRelayNotReady", "RcRelayTokenFailures"} <= set(alerts)
    for rule in alerts.values():
        assert rule["labels"]["severity"] in ("critical", "warning") and rule["annotations"]["summary"]
    used = referenced_metrics(r["expr"] for r in alerts.values())
    assert used <= DOCUMENTED, used - DOCUMENTED
    assert {"rc_relay_dead_pings_total", "rc_relay_fcm_responses_total", "rc_relay_ready", "rc_relay_token_refreshes_total"} <= used


def test_the_readme_lists_exactly_the_shipped_alerts():
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yaml").read_text())
    shipped = [r["alert"] for group in rules["groups"] for r in group["rules"]]
    listed = re.findall(r"^\| `(RcRelay\w+)` \|", (ROOT / "docs" / "operations.md").read_text(), re.M)
    assert listed == shipped


def test_grafana_dashboard_shows_every_metric_and_no_other():
    dashboard = json.loads((DEPLOY / "grafana" / "rc-relay-dashboard.json").read_text())
    panels = dashboard["panels"]
    expressions = [t["expr"] for p in panels for t in p.get("targets", [])]
    used = referenced_metrics(expressions + [v.get("definition", "") for v in dashboard["templating"]["list"]])
    assert used <= DOCUMENTED, used - DOCUMENTED
    assert set(METRICS) <= used, set(METRICS) - used
    assert len({p["id"] for p in panels}) == len(panels)
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert any(v["type"] == "datasource" and v["query"] == "prometheus" for v in dashboard["templating"]["list"])


def test_the_operators_page_signs_in_through_nginx_on_a_non_default_port(emulator, tmp_path):
    """Issue 32, defect 9: with the shipped file's optional console location, a browser on https://127.0.0.1:PORT
    (a non-default port) signs in: nginx passes the Host it was sent, port included, and rc-relay compares it with
    the Origin (host case-insensitive, port defaulted); a form from another origin is still refused."""
    relay = start_relay(emulator, tmp_path, RELAY_EXTRA, server=RELAY_SERVER)
    proxy = start_proxy("nginx", tmp_path / "nginx", relay["url"].removeprefix("http://"), console=True)
    try:
        session = client_session(verify=proxy["cert"])
        origin = proxy["url"]  # https://127.0.0.1:PORT
        assert session.get(proxy["url"] + "/console/sign-in", timeout=10).status_code == 200
        wrong = session.post(proxy["url"] + "/console/sign-in", data={"token": ADMIN_TOKEN}, headers={"Origin": "https://evil.example"},
                             allow_redirects=False, timeout=30)
        assert wrong.status_code == 403, wrong.text
        signed = session.post(proxy["url"] + "/console/sign-in", data={"token": ADMIN_TOKEN}, headers={"Origin": origin},
                              allow_redirects=False, timeout=30)
        assert signed.status_code == 303, signed.text
        assert "rc_console=" in signed.headers["Set-Cookie"]
    finally:
        stop_proxy(proxy)
        stop_relay(relay)


def test_behind_a_proxy_that_appends_the_forwarded_headers_the_nearest_entries_count(emulator, tmp_path):
    """Issue #48: X-Forwarded-Host is read as X-Forwarded-For is, by the entry the nearest trusted proxy added. nginx
    here appends to both (`$proxy_add_x_forwarded_for`, and X-Forwarded-Host as `<the client's>, $http_host`), so a
    client's own X-Forwarded-Host comes first: a sign-in whose Origin matches only that forged entry is refused, one
    from the page's own origin signs in, and the client address logged is the one nginx saw, not the forged one."""
    appending = [("    proxy_set_header X-Forwarded-Host $http_host;",
                  '    proxy_set_header X-Forwarded-Host "$http_x_forwarded_host, $http_host";')]
    relay = start_relay(emulator, tmp_path, RELAY_EXTRA, server=RELAY_SERVER)
    proxy = start_proxy("nginx", tmp_path / "nginx", relay["url"].removeprefix("http://"), console=True, edits=appending)
    try:
        session = client_session(verify=proxy["cert"])
        forged = {"X-Forwarded-Host": "evil.example", "X-Forwarded-For": "203.0.113.66", "X-Request-Id": "forged-host"}
        refused = session.post(proxy["url"] + "/console/sign-in", data={"token": ADMIN_TOKEN},
                               headers={"Origin": "https://evil.example", **forged}, allow_redirects=False, timeout=30)
        assert refused.status_code == 403, refused.text
        line = wait_for_access_line(relay, "forged-host")
        assert line["client"] == CLIENT and line["peer"] == "127.0.0.1", line
        signed = session.post(proxy["url"] + "/console/sign-in", data={"token": ADMIN_TOKEN},
                              headers={"Origin": proxy["url"], **forged, "X-Request-Id": "own-origin"}, allow_redirects=False,
                              timeout=30)
        assert signed.status_code == 303, signed.text
        assert "rc_console=" in signed.headers["Set-Cookie"]
        assert wait_for_access_line(relay, "own-origin")["client"] == CLIENT
    finally:
        stop_proxy(proxy)
        stop_relay(relay)
