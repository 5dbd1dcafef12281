"""No acknowledged event is lost: kill -9 in the middle of retries, and SIGTERM with deliveries under way."""
import json
import signal
import time

import requests

from conftest import recorded, signed_headers, start_relay, stop_relay, until

BODY = json.dumps({"versionNumber": "77", "updateType": "FORCED_UPDATE"}).encode()


def spool_config(spool, drain=20):
    return f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
delivery: {{answerWithinSeconds: 0.3, spoolDirectory: "{spool}", drainSeconds: {drain}, maxAttempts: 20, maxDelaySeconds: 0.5}}
"""


def fail_fcm(emulator, count):
    requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "retryAfter": "1", "count": count}, timeout=10)


def post(relay):
    return requests.post(relay["webhook"], data=BODY, headers={"content-type": "application/json", **signed_headers(BODY)}, timeout=30)


def test_kill_9_during_retries_then_restart_delivers_the_acknowledged_ping(emulator, tmp_path):
    spool = tmp_path / "spool"
    fail_fcm(emulator, 1000)  # FCM is down
    relay = start_relay(emulator, tmp_path, spool_config(spool))
    answer = post(relay)
    assert answer.status_code == 202, answer.text
    assert len(list(spool.glob("*.json"))) == 1
    relay["proc"].proc.send_signal(signal.SIGKILL)
    relay["proc"].proc.wait(timeout=10)
    requests.delete(emulator["url"] + "/emulator/messages", timeout=10)  # FCM is back (faults cleared)
    restarted = start_relay(emulator, tmp_path, spool_config(spool))
    try:
        assert until(lambda: recorded(emulator), 120), "the replayed ping never reached FCM"
        assert [m["message"]["data"]["CONFIG_VERSION"] for m in recorded(emulator)] == ["77"]
        deadline = time.time() + 30
        while list(spool.glob("*.json")) and time.time() < deadline:
            time.sleep(0.05)
        assert list(spool.glob("*.json")) == []
        assert restarted["proc"].saw("replaying spooled events")
    finally:
        stop_relay(restarted)


def test_sigterm_lets_deliveries_under_way_finish(emulator, tmp_path):
    spool = tmp_path / "spool"
    fail_fcm(emulator, 2)  # two failures, a second apart, then FCM accepts
    relay = start_relay(emulator, tmp_path, spool_config(spool))
    assert post(relay).status_code == 202
    relay["proc"].proc.send_signal(signal.SIGTERM)
    assert relay["proc"].proc.wait(timeout=30) == 0
    assert len(recorded(emulator)) == 1
    assert list(spool.glob("*.json")) == []


def test_sigterm_spools_what_the_grace_period_cannot_finish(emulator, tmp_path):
    spool = tmp_path / "spool"
    fail_fcm(emulator, 1000)
    relay = start_relay(emulator, tmp_path, spool_config(spool, drain=0.5))
    assert post(relay).status_code == 202
    relay["proc"].proc.send_signal(signal.SIGTERM)
    assert relay["proc"].proc.wait(timeout=30) == 0
    assert "spooled for the next start" in relay["proc"].output
    assert len(list(spool.glob("*.json"))) == 1
    assert recorded(emulator) == []
