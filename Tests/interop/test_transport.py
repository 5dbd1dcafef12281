"""The transport production uses: TLS to Google with HTTP/2 by ALPN, and Google's front ends ending long-lived
connections with GOAWAY. The emulator serves HTTPS with HTTP/2 and a certificate made here by openssl, for a test CA
the relay trusts through `fcm.caFile` only; it ends each connection with GOAWAY once it is a fraction of a second old.
FCM's record (every message accepted, and the emulator's counters of HTTP/2 streams and connections) decides."""
import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from certificates import make_certificates
from conftest import BINARY, require, signed_headers, start_emulator, start_relay, stop_relay


@pytest.fixture
def certificates(tmp_path):
    """A CA, and a certificate it signed for localhost and 127.0.0.1, as PEM files."""
    require("openssl")
    return make_certificates(tmp_path / "tls")


def tls_emulator(tmp_path, certificates, *options):
    directory = tmp_path / "emulator"
    directory.mkdir()
    emulator = start_emulator(directory, "--tls-cert", str(certificates["cert"]), "--tls-key", str(certificates["key"]), *options)
    assert emulator["url"].startswith("https://localhost:")
    emulator["verify"] = str(certificates["ca"])  # the test's own requests check the certificate too
    return emulator


def send(relay, version):
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
    return requests.post(relay["webhook"], data=body, headers={"Content-Type": "application/json", **signed_headers(body)}, timeout=60)


def stats(emulator):
    return requests.get(emulator["url"] + "/emulator/stats", timeout=10, verify=emulator["verify"]).json()


def versions_sent(emulator):
    return sorted(int(m["message"]["data"]["CONFIG_VERSION"]) for m in recorded(emulator))


def recorded(emulator):
    return requests.get(emulator["url"] + "/emulator/messages", timeout=10, verify=emulator["verify"]).json()


ROUTES = """
webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}
delivery: {baseDelaySeconds: 0.05, maxDelaySeconds: 0.2}
routes:
  - name: stale
    topic: PUSH_RC
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
"""


def test_goaway_and_resets_mid_burst_lose_nothing_and_duplicate_nothing(tmp_path, certificates):
    # Every connection is ended with GOAWAY once it is 0.2 s old, while bursts of 8 concurrent webhooks run. A spool,
    # so that a webhook whose first attempt a GOAWAY or a reset cut is acknowledged (202) and delivered after.
    emulator = tls_emulator(tmp_path, certificates, "--max-connection-age", "0.2")
    spool = tmp_path / "spool"
    relay = start_relay(
        emulator, tmp_path, ROUTES.replace("maxDelaySeconds: 0.2", f'maxDelaySeconds: 0.2, spoolDirectory: "{spool}"'),
        fcm=f', caFile: "{certificates["ca"]}"')
    try:
        sent = []
        version = 1000

        def burst(pool):
            nonlocal version
            batch = list(range(version, version + 8))
            for answer in pool.map(lambda v: send(relay, v), batch):
                # Delivered (200), or acknowledged and spooled (202): never refused, never a duplicate.
                assert answer.status_code in (200, 202), answer.text
                assert answer.json().get("duplicate") in (None, False)
            sent.extend(batch)
            version += 8

        with ThreadPoolExecutor(max_workers=8) as pool:
            # Until GOAWAY has ended connections at least three times, with a cap. (Not "until the fourth connection": the
            # count of connections can run ahead of the GOAWAYs, as one run with four connections and two GOAWAYs showed.)
            while stats(emulator)["goAways"] < 3:
                assert version < 3000, "the emulator's connections were never ended"
                burst(pool)
            # Streams reset by the server mid-burst, before FCM records them (RST_STREAM, as a front end that refuses
            # a stream does): the relay tries them again.
            requests.post(emulator["url"] + "/emulator/faults", json={"drop": True, "count": 5}, timeout=10, verify=emulator["verify"])
            burst(pool)
        # Each ping ends once in the log: accepted by FCM, or superseded while it waited to retry (a newer version's
        # ping to the same audience took over, as the relay coalesces), or before a first attempt because FCM had
        # accepted a newer version's ping there already. Once each has, nothing more is sent.
        endings = ("ping accepted by FCM", "ping superseded", "ping stands down: FCM accepted a newer version")

        def ended():
            return [line for line in relay["proc"].lines if any(ending in line for ending in endings)]

        while len(ended()) < len(sent):
            relay["proc"].wait_for(lambda line: any(ending in line for ending in endings))
        assert len(ended()) == len(sent)
        accepted = sorted(int(json.loads(line)["version"]) for line in ended() if "ping accepted by FCM" in line)
        counters = stats(emulator)
        # Nothing lost: FCM has every version the relay saw accepted, and the newest; every send was an HTTP/2 stream,
        # and each GOAWAY moved the sends to a new connection.
        recorded_versions = versions_sent(emulator)
        assert set(accepted) <= set(recorded_versions)
        assert max(sent) in recorded_versions
        assert counters["http2Sends"] == counters["sendRequests"]
        assert counters["goAways"] >= 3 and counters["sendConnections"] >= counters["goAways"]
        # Nothing twice: every version FCM recorded, it recorded once. A stream the emulator refused or never answered
        # was not processed, so the relay's retry of it is safe; one it processed is answered, GOAWAY or not.
        twice = [v for v in set(recorded_versions) if recorded_versions.count(v) > 1]
        assert twice == [], f"sent twice: {twice}"
    finally:
        stop_relay(relay)
        emulator["proc"].stop()


def test_a_certificate_the_relay_does_not_trust_sends_nothing(tmp_path, certificates):
    emulator = tls_emulator(tmp_path, certificates)
    # No fcm.caFile: the emulator's certificate is checked against the system's roots only, and refused.
    relay = start_relay(emulator, tmp_path, ROUTES.replace("maxDelaySeconds: 0.2", "maxDelaySeconds: 0.2, maxAttempts: 2"))
    try:
        answer = send(relay, 7)
        assert answer.status_code == 503, answer.text
        relay["proc"].wait_for(lambda line: "certificate" in line.lower() or "handshake" in line.lower())
        counters = stats(emulator)
        assert counters["tokenRequests"] == 0 and counters["sendRequests"] == 0
        assert recorded(emulator) == []
    finally:
        stop_relay(relay)
        emulator["proc"].stop()


def test_a_ca_file_that_is_not_pem_is_refused_at_start(tmp_path, certificates, emulator):
    bogus = tmp_path / "not-a-ca.pem"
    bogus.write_text("hello\n")
    config = tmp_path / "rc-relay.yaml"
    config.write_text(f'fcm: {{credentialsFile: "{emulator["key_file"]}", caFile: "{bogus}"}}\n')
    result = subprocess.run([BINARY, "check", "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "fcm.caFile" in result.stdout + result.stderr
