"""`rc-relay doctor` against the emulator (and a throwaway PostgreSQL, a JWKS server, a token endpoint whose clock is
off): every failure mode the docs name, and success. Nothing it does sends a real ping."""
import json
import subprocess
import threading
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import time

import pytest
import requests

from conftest import BINARY, SECRET, start_emulator
from postgres import free_port

RC_SCOPE = "https://www.googleapis.com/auth/firebase.remoteconfig"
ROUTES = """
routes:
  - name: default
    topic: PUSH_RC
  - name: staged
    waves: {shards: 4, spreadSeconds: 60, topic: "rc_{shard}"}
  - name: by-language
    topic: EVERYONE
    audience: {ios_ja: lang_ja, ios_ko: lang_ko}
"""


@pytest.fixture
def emulator(tmp_path):
    emulator = start_emulator(tmp_path)
    yield emulator
    emulator["proc"].stop()


def doctor(tmp_path, emulator, extra="", fcm="", routes=ROUTES, key_file=None, table=False, columns=None):
    """Runs `rc-relay doctor` on a configuration pointing at the emulator: the exit status, and the JSON report (or the
    table's text with `table=True`)."""
    config = tmp_path / "doctor.yaml"
    config.write_text(
        f"""
fcm: {{credentialsFile: "{key_file or emulator['key_file']}", baseURL: "{emulator['url']}"{fcm}}}
remoteConfig: {{baseURL: "{emulator['url']}"}}
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
{extra}
{routes}
"""
    )
    args = [BINARY, "doctor", "--config", str(config)] + ([] if table else ["--json"])
    env = {"TEST_WEBHOOK_SECRET": SECRET, "PATH": "/usr/bin:/bin", **({"COLUMNS": str(columns)} if columns else {})}
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    output = result.stdout + result.stderr
    assert SECRET not in output and "ya29." not in output and "PRIVATE KEY" not in output, output
    return result.returncode, (result.stdout if table else json.loads(result.stdout))


def by_check(report):
    return {check["check"]: check for check in report["checks"]}


def stats(emulator):
    return requests.get(emulator["url"] + "/emulator/stats", timeout=10).json()


def test_a_right_set_up_passes_and_sends_no_ping(tmp_path, emulator):
    status, report = doctor(tmp_path, emulator, extra="poll: {intervalSeconds: 60}")
    checks = by_check(report)
    assert status == 0 and report["ok"] is True, report
    assert [c["result"] for c in report["checks"]] == ["ok"] * len(report["checks"]), report
    # Each route's message: its target, a waved route's first shard, each topic of an audience.
    assert {name for name in checks if name.startswith("fcm ")} == {
        "fcm route default", "fcm route staged shard 0", "fcm route by-language",
        "fcm route by-language audience ios_ja", "fcm route by-language audience ios_ko",
    }
    assert "topic:rc_0" in checks["fcm route staged shard 0"]["detail"]
    assert "firebase.messaging" in checks["access token"]["detail"]
    assert checks["credentials"]["project"] == "demo-project"
    assert "firebase-adminsdk" in checks["credentials"]["detail"]
    # validate_only only: FCM was asked five times and delivered nothing.
    counts = stats(emulator)
    assert counts["validatedOnly"] == 5 and counts["accepted"] == 0
    assert requests.get(emulator["url"] + "/emulator/messages", timeout=10).json() == []


def test_the_table_reads_well(tmp_path, emulator):
    requests.post(emulator["url"] + "/emulator/faults", json={"endpoint": "remoteConfig", "status": 403, "count": 5}, timeout=10)
    status, text = doctor(tmp_path, emulator, extra="poll: {intervalSeconds: 60}", table=True)
    assert status == 1
    lines = text.splitlines()
    assert lines[0].startswith("rc-relay doctor: ") and lines[2].split() == ["CHECK", "RESULT", "WHAT", "TO", "DO"]
    assert "project demo-project" in lines
    assert any(line.startswith("  remote config") and "fail:" in line for line in lines), text
    assert "roles/firebaseremoteconfig.viewer" in text.replace("\n", " ").replace("  ", "")
    assert lines[-1].startswith("10 checks: 9 ok, 1 fail.")
    assert all(len(line) <= 120 for line in lines), text
    # Narrower when asked (COLUMNS, as a terminal's width), still every word of what to do.
    status, narrow = doctor(tmp_path, emulator, extra="poll: {intervalSeconds: 60}", table=True, columns=80)
    assert all(len(line) <= 80 for line in narrow.splitlines()[1:]), narrow  # the first names the file
    assert "roles/firebaseremoteconfig.viewer" in narrow
    assert "\x1b[" not in text, "colour only on a terminal"


def test_a_key_of_another_project_fails(tmp_path, emulator):
    status, report = doctor(tmp_path, emulator, fcm=", project: prod-project")
    checks = by_check(report)
    assert status == 1 and report["ok"] is False
    assert checks["credentials"]["result"] == "fail"
    assert "the configuration names project prod-project" in checks["credentials"]["detail"]
    assert "prod-project" in checks["credentials"]["fix"]
    assert checks["fcm route default"]["result"] == "fail"
    assert "SENDER_ID_MISMATCH" in checks["fcm route default"]["detail"]


def test_a_token_without_fcms_scope_fails(tmp_path, emulator):
    # The workload's access scopes leave FCM's out: its tokens carry Remote Config's alone.
    requests.post(emulator["url"] + "/emulator/scopes", json={"scopes": [RC_SCOPE]}, timeout=10).raise_for_status()
    status, report = doctor(tmp_path, emulator)
    checks = by_check(report)
    assert status == 1
    assert checks["access token"]["result"] == "fail"
    assert "lacks https://www.googleapis.com/auth/firebase.messaging" in checks["access token"]["detail"]
    assert "cloud-platform" in checks["access token"]["fix"]
    assert checks["fcm route default"]["result"] == "fail"
    assert "insufficient authentication scopes" in checks["fcm route default"]["detail"]
    assert "scope" in checks["fcm route default"]["fix"]


def test_a_403_from_remote_config_names_the_role_to_grant(tmp_path, emulator):
    requests.post(emulator["url"] + "/emulator/faults", json={"endpoint": "remoteConfig", "status": 403, "count": 5}, timeout=10)
    status, report = doctor(tmp_path, emulator, extra="poll: {intervalSeconds: 60}")
    check = by_check(report)["remote config"]
    assert status == 1 and check["result"] == "fail"
    assert "403" in check["detail"]
    assert check["fix"].startswith("grant roles/firebaseremoteconfig.viewer to firebase-adminsdk")
    # Not needed, not asked: without polling or change-aware routes Remote Config is skipped.
    requests.post(emulator["url"] + "/emulator/faults", json={"endpoint": "remoteConfig", "status": 403, "count": 5}, timeout=10)
    status, report = doctor(tmp_path, emulator, routes="routes: [{name: default, topic: PUSH_RC}]")
    assert status == 0 and by_check(report)["remote config"]["result"] == "skip"


def test_a_route_with_a_reserved_data_key_fails(tmp_path, emulator):
    status, report = doctor(tmp_path, emulator, routes="routes: [{name: default, topic: PUSH_RC, data: {from: me}}]")
    assert status == 1
    check = by_check(report)["configuration"]
    assert check["result"] == "fail" and "data.from" in check["detail"] and "reserve" in check["detail"]
    assert stats(emulator)["sendRequests"] == 0


def test_a_message_fcm_refuses_fails_its_route(tmp_path, emulator):
    # FCM's own answer, whatever the reason: here an injected 400 for the second message asked about.
    requests.post(emulator["url"] + "/emulator/faults", json={"status": 200}, timeout=10)
    requests.post(emulator["url"] + "/emulator/faults", json={"status": 400, "errorCode": "INVALID_ARGUMENT"}, timeout=10)
    status, report = doctor(tmp_path, emulator)
    checks = by_check(report)
    assert status == 1
    assert checks["fcm route staged shard 0"]["result"] == "fail"
    assert "400 INVALID_ARGUMENT" in checks["fcm route staged shard 0"]["detail"]
    assert "route 'staged'" in checks["fcm route staged shard 0"]["fix"]
    assert checks["fcm route by-language"]["result"] == "ok"


def test_a_token_endpoint_that_is_down_fails_and_skips_what_needs_a_token(tmp_path, emulator):
    key = dict(emulator["key"], token_uri=f"http://127.0.0.1:{free_port()}/token")
    key_file = tmp_path / "down.json"
    key_file.write_text(json.dumps(key))
    status, report = doctor(tmp_path, emulator, key_file=key_file, extra="poll: {intervalSeconds: 60}")
    checks = by_check(report)
    assert status == 1
    assert checks["access token"]["result"] == "fail"
    assert "could not be reached" in checks["access token"]["detail"]
    assert "127.0.0.1" in checks["access token"]["fix"]
    # Every check that needs a token is there, skipped, saying why.
    assert {name: c["result"] for name, c in checks.items() if name.startswith("fcm ") or name == "remote config"} == {
        "fcm route default": "skip", "fcm route staged shard 0": "skip", "fcm route by-language": "skip",
        "fcm route by-language audience ios_ja": "skip", "fcm route by-language audience ios_ko": "skip", "remote config": "skip",
    }
    assert "no access token" in checks["fcm route default"]["detail"]
    assert checks["clock"]["result"] == "skip"


class _SkewedTokenEndpoint(BaseHTTPRequestHandler):
    """Google's token endpoint on a clock ten minutes behind the host's: it refuses the assertion, and every answer
    carries its Date."""

    def _answer(self):
        body = json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT: Token must be a short-lived token"}).encode()
        self.send_response(400)
        self.send_header("Date", formatdate(time.time() - 600, usegmt=True))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def date_time_string(self, timestamp=None):
        return formatdate(time.time() - 600, usegmt=True)

    def log_message(self, *args):
        pass


def test_a_host_clock_far_off_fails(tmp_path, emulator):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SkewedTokenEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        key = dict(emulator["key"], token_uri=f"http://127.0.0.1:{server.server_address[1]}/token")
        key_file = tmp_path / "skewed.json"
        key_file.write_text(json.dumps(key))
        status, report = doctor(tmp_path, emulator, key_file=key_file)
    finally:
        server.shutdown()
    checks = by_check(report)
    assert status == 1
    assert checks["clock"]["result"] == "fail"
    assert "ahead of the token endpoint's" in checks["clock"]["detail"]
    assert "NTP" in checks["clock"]["fix"]
    assert checks["access token"]["result"] == "fail" and "invalid_grant" in checks["access token"]["detail"]
    assert "clock" in checks["access token"]["fix"]


def test_the_store_and_oidc_are_checked_when_configured(tmp_path, emulator, cluster):
    jwks = {"keys": [{"kty": "RSA", "kid": "k1", "n": "sXch", "e": "AQAB", "alg": "RS256", "use": "sig"}]}

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(jwks).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    oidc = (
        "  auth: any\n"
        f'oidc: {{audiences: ["https://relay.example/pubsub/remote-config"], allowedEmails: [push@p.iam.gserviceaccount.com], '
        f'jwksURL: "http://127.0.0.1:{server.server_address[1]}/certs"}}'
    )
    try:
        status, report = doctor(tmp_path, emulator, extra=f'store: {{postgres: {{url: "{cluster.url}"}}}}')
        store = by_check(report)["store"]
        # A database the relay never used: nothing wrong, serve creates its tables.
        assert status == 0 and store["result"] == "warn" and "no rc-relay tables yet" in store["detail"], report
        config = (tmp_path / "doctor.yaml").read_text().replace("webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}", "webhook:\n  secrets: [{env: TEST_WEBHOOK_SECRET}]\n" + oidc)
        (tmp_path / "doctor.yaml").write_text(config)
        result = subprocess.run([BINARY, "doctor", "-c", str(tmp_path / "doctor.yaml"), "--json"], capture_output=True, text=True,
                                timeout=120, env={"TEST_WEBHOOK_SECRET": SECRET})
        checks = by_check(json.loads(result.stdout))
        assert checks["oidc keys"]["result"] == "ok" and "1 key(s)" in checks["oidc keys"]["detail"], result.stdout
        assert checks["oidc audiences"]["detail"] == "https://relay.example/pubsub/remote-config"
    finally:
        server.shutdown()
    cluster.stop()
    status, report = doctor(tmp_path, emulator, extra=f'store: {{postgres: {{url: "{cluster.url}"}}}}')
    store = by_check(report)["store"]
    assert status == 1 and store["result"] == "fail" and "store.postgres" in store["fix"], report


def test_the_metadata_servers_account_is_checked_like_a_key(tmp_path, emulator):
    # On Cloud Run or Compute Engine: no key file; the project and the token come from the metadata server.
    config = tmp_path / "metadata.yaml"
    config.write_text(
        f"""
fcm: {{metadataURL: "{emulator['url']}", baseURL: "{emulator['url']}"}}
remoteConfig: {{baseURL: "{emulator['url']}"}}
poll: {{intervalSeconds: 60}}
routes: [{{name: default, topic: PUSH_RC}}]
"""
    )

    def run():
        result = subprocess.run([BINARY, "doctor", "--config", str(config), "--json"], capture_output=True, text=True, timeout=120,
                                env={"PATH": "/usr/bin:/bin"})
        return result.returncode, by_check(json.loads(result.stdout))

    status, checks = run()
    assert status == 0, checks
    assert checks["credentials"]["project"] == "demo-project"
    assert "metadata server" in checks["credentials"]["detail"]
    assert checks["remote config"]["result"] == "ok"
    # An instance whose access scopes leave FCM's out: its tokens carry Remote Config's alone.
    requests.post(emulator["url"] + "/emulator/scopes", json={"scopes": [RC_SCOPE]}, timeout=10).raise_for_status()
    status, checks = run()
    assert status == 1
    assert checks["access token"]["result"] == "fail" and "firebase.messaging" in checks["access token"]["detail"]
    assert checks["fcm route default"]["result"] == "fail"
    assert checks["remote config"]["result"] == "ok"
