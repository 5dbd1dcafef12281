"""The admin surface from outside: schemathesis against the live server with openapi.yaml, and SIGHUP reloads."""
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from conftest import ROOT, SECRET, recorded, signed_headers, start_relay, stop_relay

ADMIN_TOKEN = "interop-admin-token-" + os.urandom(12).hex()
ADMIN = f'admin: {{tokens: ["{ADMIN_TOKEN}"]}}'
WEBHOOK_AUTH = "webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}"
# Generated cases per operation: with the spec's operations, more than 2,000 in all.
SCHEMATHESIS_EXAMPLES = 160


def stop_and_check(relay):
    stop_relay(relay)
    assert ADMIN_TOKEN not in relay["proc"].output, "an admin token was logged"


@pytest.mark.parametrize("seed", [20261127, random.randrange(1, 2**31)], ids=["fixed-seed", "new-seed"])
def test_schemathesis_with_every_check_finds_nothing(emulator, tmp_path, seed):
    """Every check schemathesis has, at least 2,000 generated cases: with a fixed seed (the same cases every run), and
    with a new seed each run (printed, to reproduce)."""
    relay = start_relay(emulator, tmp_path, f"{WEBHOOK_AUTH}\n{ADMIN}")
    try:
        # A signed webhook first, so the deliveries list and the metrics have something in them.
        body = b'{"versionNumber": "77"}'
        assert requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30).status_code == 200
        report = tmp_path / "junit.xml"
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "schemathesis"), "run", str(ROOT / "openapi.yaml"),
                "--url", relay["url"],
                "--header", f"Authorization: Bearer {ADMIN_TOKEN}",
                "--checks", "all",
                "--max-examples", str(SCHEMATHESIS_EXAMPLES),
                "--seed", str(seed),
                "--report", "junit", "--report-junit-path", str(report),
                "--no-color",
            ],
            capture_output=True, text=True, timeout=1200, env={**os.environ, "SCHEMATHESIS_HOOKS": ""},
        )
        print(f"schemathesis seed {seed}")
        (tmp_path.parent / "schemathesis-output.txt").write_text(result.stdout)
        print(result.stdout[-6000:])
        assert result.returncode == 0, f"seed {seed}\n" + result.stdout[-12000:] + result.stderr[-2000:]
        # Every operation was exercised, not only the easy ones, and the run was as large as promised.
        text = report.read_text()
        for operation in ["/admin/send", "/admin/deliveries/{id}/retry", "/admin/deliveries/{id}/discard", "/admin/reload", "/readyz", "/webhooks/remote-config"]:
            assert operation in text, f"schemathesis did not test {operation}"
        cases = generated_cases(result.stdout)
        assert cases >= 2000, f"only {cases} cases were generated (seed {seed})"
        assert ADMIN_TOKEN not in relay["proc"].output
    finally:
        stop_and_check(relay)


def generated_cases(output):
    """How many test cases schemathesis generated, from its summary ("3282 generated, ...")."""
    match = re.search(r"^\s*(\d+) generated\b", output, re.M)
    assert match, "schemathesis printed no count of generated cases"
    return int(match.group(1))


def test_sighup_reloads_the_file_and_a_bad_file_changes_nothing(emulator, tmp_path):
    relay = start_relay(emulator, tmp_path, f"{WEBHOOK_AUTH}\n{ADMIN}\nroutes: [{{name: first, topic: FIRST}}]")
    config = tmp_path / "rc-relay.yaml"
    try:
        def send(version):
            body = json.dumps({"versionNumber": version}).encode()
            return requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30)

        assert send("1").status_code == 200
        config.write_text(config.read_text().replace("name: first, topic: FIRST", "name: second, topic: SECOND"))
        relay["proc"].proc.send_signal(signal.SIGHUP)
        relay["proc"].wait_for(lambda line: "configuration reloaded on SIGHUP" in line)
        assert send("2").status_code == 200
        assert [m["message"].get("topic") for m in recorded(emulator)] == ["FIRST", "SECOND"]

        config.write_text(config.read_text().replace("topic: SECOND", "topic: 'not a topic'"))
        relay["proc"].proc.send_signal(signal.SIGHUP)
        line = relay["proc"].wait_for(lambda line: "reload on SIGHUP refused" in line)
        assert "routes[0].topic" in line
        assert send("3").status_code == 200
        assert [m["message"].get("topic") for m in recorded(emulator)][-1] == "SECOND"
        info = requests.get(relay["url"] + "/admin/info", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10).json()
        assert info["configuration"]["reloads"] == 1
    finally:
        stop_and_check(relay)


def test_admin_token_rotation_through_a_mounted_file(emulator, tmp_path):
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    relay = start_relay(emulator, tmp_path, f'{WEBHOOK_AUTH}\nadmin: {{tokens: [{{file: "{token_file}"}}]}}')
    try:
        url = relay["url"] + "/admin/routes"
        assert requests.get(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10).status_code == 200
        refused = requests.get(url, headers={"Authorization": "Bearer nope-nope-nope-nope"}, timeout=10)
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert SECRET not in requests.get(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10).text
    finally:
        stop_and_check(relay)


def test_every_refused_admin_call_is_logged_once_with_its_status_problem_and_reason(emulator, tmp_path):
    """docs/operations.md, Logs: a refusal is logged once, with `status`, `problem` and `reason` (the answer's
    `detail`), at `notice`, whichever part of the admin API refuses it: the gate (no token, a body over the limit), the
    body's reader, a parameter out of range, a ping that is not there or cannot be retried. Until 2026-12-06 the
    handlers' own refusals (404, 409, a bad `limit`) were answered and not logged at all."""
    relay = start_relay(emulator, tmp_path, f"{WEBHOOK_AUTH}\n{ADMIN}")
    proc = relay["proc"]
    try:
        body = json.dumps({"versionNumber": "5"}).encode()
        delivered = requests.post(relay["webhook"], data=body, headers={"content-type": "application/json", **signed_headers(body)}, timeout=30)
        assert delivered.status_code == 200, delivered.text
        ping = delivered.json()["deliveries"][0]["id"]
        json_body = {"content-type": "application/json"}
        cases = [
            ("refused-1", "GET", "/admin/info", None, {}, 401, "unauthorized"),
            ("refused-2", "GET", "/admin/deliveries/no-such-ping", None, {}, 404, "not-found"),
            ("refused-3", "GET", "/admin/deliveries?limit=0", None, {}, 400, "invalid-request"),
            ("refused-4", "POST", f"/admin/deliveries/{ping}/retry", None, {}, 409, "not-retryable"),
            ("refused-5", "POST", "/admin/send", b"{not json", json_body, 400, "invalid-request"),
            ("refused-6", "POST", "/admin/send", b" " * 70000, json_body, 413, "body-too-large"),
        ]
        for request_id, method, path, data, headers, status, problem in cases:
            token = {} if status == 401 else {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            answer = requests.request(method, relay["url"] + path, data=data, headers={**token, **headers, "X-Request-Id": request_id},
                                      timeout=30)
            assert answer.status_code == status, (path, answer.text)
            assert answer.json()["type"] == f"urn:rc-relay:problem:{problem}", (path, answer.text)
            proc.wait_for(lambda l: '"msg":"request"' in l and f'"{request_id}"' in l)
            lines = [json.loads(l) for l in proc.lines if f'"{request_id}"' in l and '"msg":"request"' not in l]
            refusals = [line for line in lines if line["level"] != "debug"]
            assert len(refusals) == 1, (path, refusals)
            line = refusals[0]
            assert line["level"] == "notice", line
            assert (line["status"], line["problem"], line["reason"]) == (str(status), problem, answer.json()["detail"]), line
    finally:
        stop_and_check(relay)
