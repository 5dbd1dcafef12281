"""Staged waves against the emulator, on the real binary: FCM's recorded messages decide. A SIGTERM mid-wave spools
the shards not yet pinged, and the next start pings exactly those: every shard once for the version."""
import json
import signal
import time
from datetime import datetime

import requests

from conftest import recorded, signed_headers, start_relay, stop_relay

ADMIN = "wave-admin-token-0123456789"
BODY = json.dumps({"versionNumber": "77", "updateType": "INCREMENTAL_UPDATE"}).encode()


def config(spool):
    return f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN}"]}}
delivery: {{answerWithinSeconds: 120, spoolDirectory: "{spool}", drainSeconds: 0.5}}
routes:
  - name: stale
    waves: {{shards: 4, spreadSeconds: 120, topic: "PUSH_RC_{{shard}}"}}
    data: {{CONFIG_STATE: STALE, CONFIG_VERSION: "{{{{version}}}}"}}
"""


def accepted(line, routes):
    """Whether a relay log line says FCM accepted the ping of one of `routes`."""
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return entry.get("msg") == "ping accepted by FCM" and entry.get("route") in routes


def shards(emulator):
    return [(m["message"]["topic"], m["message"]["data"]["CONFIG_VERSION"]) for m in recorded(emulator)]


def test_a_wave_is_answered_at_once_and_a_restart_mid_wave_resumes_with_the_shards_still_due(emulator, tmp_path):
    spool = tmp_path / "spool"
    relay = start_relay(emulator, tmp_path, config(spool))
    started = time.monotonic()
    answer = requests.post(
        relay["webhook"], data=BODY, headers={"content-type": "application/json", **signed_headers(BODY)}, timeout=30)
    # Shards 1-3 wait for their turns (30 s apart: the SIGTERM below lands long before the last, even on a slow
    # machine): the sender is told 202 once the event is on disk, not after the 120 s it could wait (half of that is a
    # bound only a relay that waited reaches).
    assert answer.status_code == 202, answer.text
    assert time.monotonic() - started < 60
    assert len(list(spool.glob("*.json"))) == 1
    relay["proc"].wait_for(lambda line: accepted(line, {"stale@0"}))
    schedules = requests.get(relay["url"] + "/admin/schedules", headers={"authorization": f"Bearer {ADMIN}"}, timeout=10).json()
    wave = schedules["waves"][0]
    assert (wave["route"], wave["versionNumber"], wave["shards"]) == ("stale", "77", 4)
    assert wave["sent"] >= 1 and "nextSendAt" in wave
    pending = requests.get(
        relay["url"] + "/admin/deliveries?status=pending", headers={"authorization": f"Bearer {ADMIN}"}, timeout=10).json()
    waiting = [d for d in pending["deliveries"] if d.get("waitingFor", "").startswith("wave turn of shard")]
    assert waiting, pending
    assert all(d["route"] in {"stale@1", "stale@2", "stale@3"} and d["shards"] == 4 and d["waitingUntil"] for d in waiting)

    relay["proc"].proc.send_signal(signal.SIGTERM)
    assert relay["proc"].proc.wait(timeout=30) == 0
    stop_relay(relay)
    before = shards(emulator)
    files = list(spool.glob("*.json"))
    assert len(files) == 1, "the shards not yet pinged are handed over to the spool"
    still_due = json.loads(files[0].read_text())["routes"]
    assert sorted(still_due) == sorted(f"stale@{topic.rsplit('_', 1)[1]}" for topic in
                                       {f"PUSH_RC_{n}" for n in range(4)} - {t for t, _ in before})

    restarted = start_relay(emulator, tmp_path, config(spool))
    try:
        due = set(still_due)
        while due:
            line = restarted["proc"].wait_for(lambda line: accepted(line, due), timeout=120)
            due.discard(json.loads(line)["route"])
        # The resumed wave keeps its spacing (30 s): FCM's own receive times, a lower bound a slow machine cannot break.
        times = [datetime.fromisoformat(m["receivedAt"].replace("Z", "+00:00")) for m in recorded(emulator)][len(before):]
        assert all((b - a).total_seconds() >= 20 for a, b in zip(times, times[1:])), times
        after = shards(emulator)
        assert sorted(after) == [(f"PUSH_RC_{n}", "77") for n in range(4)], "every shard once for version 77"
        assert len(after) > len(before), "the restart resumed the wave"
    finally:
        stop_relay(restarted)
    # Stopped with nothing due: the event is settled, so its spool file is gone.
    assert list(spool.glob("*.json")) == [], "the spool file goes once every shard is accepted"
