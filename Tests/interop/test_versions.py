"""Version numbers and ids an attacker (or a broken script) chooses, on the real binary with the emulator: a signed
webhook with a version Remote Config never published is relayed but silences nothing (defect 6 of issue 32); an
operator can reset a project's marks; ids and filters with control characters are a 400, in memory and with
`store.postgres` (defect 5). The emulator's record decides."""
import json

import pytest
import requests

from conftest import recorded, signed_headers, start_relay, stop_relay, until

ADMIN = "versions-admin-token-0123456789"
INT64_MAX = 9223372036854775807


WAVED = """
routes:
  - name: waved
    waves: {shards: 2, spreadSeconds: 1, topic: "PUSH_RC_{shard}"}
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
"""

PLAIN = """
routes:
  - name: stale
    topic: PUSH_RC
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
"""


def relay_config(emulator, routes=WAVED, delivery="", store=""):
    """Polling on, the emulator's Remote Config; a wave's pings are answered 202 once spooled (`delivery`)."""
    return f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN}"]}}
delivery: {{answerWithinSeconds: 5, baseDelaySeconds: 0.2, maxDelaySeconds: 1{delivery}}}
poll: {{intervalSeconds: 10, graceSeconds: 0}}
remoteConfig: {{baseURL: "{emulator['url']}"}}
{routes}
{store}
"""


def publish(emulator, greeting):
    template = {"parameters": {"welcome": {"defaultValue": {"value": greeting}, "valueType": "STRING"}}}
    answer = requests.post(f"{emulator['url']}/emulator/remote-config/demo-project/publish", json=template, timeout=10)
    assert answer.ok, answer.text
    return int(answer.json()["versionNumber"])


def post(relay, body, headers=None):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return requests.post(
        relay["webhook"], data=data, headers={"Content-Type": "application/json", **signed_headers(data), **(headers or {})}, timeout=30)


def pings(emulator):
    """(topic, version) of every message the emulator accepted, in order."""
    return [(m["message"]["topic"], m["message"]["data"]["CONFIG_VERSION"]) for m in recorded(emulator)]


def wait_for_pings(emulator, version, timeout=60):
    """Waits until both shards were pinged with `version` (conftest.until: FCM's record prints no line)."""
    wanted = {("PUSH_RC_0", str(version)), ("PUSH_RC_1", str(version))}
    assert until(lambda: wanted <= set(pings(emulator)), timeout), pings(emulator)


def test_a_version_remote_config_never_published_silences_nothing(emulator, tmp_path):
    first = publish(emulator, "Hello")
    spool = tmp_path / "spool"
    relay = start_relay(emulator, tmp_path, relay_config(emulator, delivery=f', spoolDirectory: "{spool}"'))
    try:
        relay["proc"].wait_for(lambda line: "adopted the current version without a ping" in line, timeout=60)
        # int64's largest value, as a JSON number: relayed at once (both shards), but it moves no mark.
        huge = post(relay, {"versionNumber": INT64_MAX})
        assert huge.status_code in (200, 202), huge.text
        assert relay["proc"].saw("not one Remote Config lists")
        wait_for_pings(emulator, INT64_MAX)
        # The same value as a 19-digit string is the same version (int64 as Google's JSON mapping writes it): a
        # duplicate, answered from the first delivery.
        again = post(relay, {"versionNumber": str(INT64_MAX)})
        assert again.status_code == 200 and again.json()["duplicate"] is True, again.text
        assert json.loads((spool / "state" / "relayed-versions.json").read_text()) == {"demo-project": first}
        # One past int64 is refused, as a string and as a number.
        for body in (b'{"versionNumber": "9223372036854775808"}', b'{"versionNumber": 9223372036854775808}'):
            refused = post(relay, body)
            assert refused.status_code == 400, refused.text
            assert refused.headers["Content-Type"] == "application/problem+json"
        # A real version after it is pinged, waved as configured.
        second = publish(emulator, "Hola")
        answer = post(relay, {"versionNumber": str(second)})
        assert answer.status_code in (200, 202), answer.text
        wait_for_pings(emulator, second)
        # And one no webhook announces is found by the poll, compared with the newest real version relayed.
        third = publish(emulator, "Bonjour")
        wait_for_pings(emulator, third)
        assert [v for _, v in pings(emulator)].count(str(third)) == 2
        assert first < second < third
    finally:
        stop_relay(relay)


def test_an_operator_resets_a_projects_marks(emulator, tmp_path):
    first = publish(emulator, "Hello")
    spool = tmp_path / "spool"
    relay = start_relay(emulator, tmp_path, relay_config(emulator, delivery=f', spoolDirectory: "{spool}"'))
    headers = {"Authorization": f"Bearer {ADMIN}"}
    marks = spool / "state" / "relayed-versions.json"
    adopted = "adopted the current version without a ping"
    try:
        relay["proc"].wait_for(lambda line: adopted in line, timeout=60)
        # Written at the end of the poll that adopted it.
        assert until(lambda: marks.exists() and json.loads(marks.read_text()) == {"demo-project": first}, 30)
        answer = requests.delete(relay["url"] + "/admin/projects/demo-project/marks", headers=headers, timeout=10)
        assert answer.status_code == 200 and answer.json() == {"status": "reset", "project": "demo-project"}, answer.text
        assert relay["proc"].saw("admin reset of the project's version marks")
        # Forgotten on disk too, so the next poll adopts Remote Config's current version again, without a ping.
        assert json.loads(marks.read_text()) == {}
        relay["proc"].wait_for(lambda line: adopted in line, timeout=60)
        assert recorded(emulator) == []
        unknown = requests.delete(relay["url"] + "/admin/projects/nowhere/marks", headers=headers, timeout=10)
        assert unknown.status_code == 404 and unknown.headers["Content-Type"] == "application/problem+json"
        assert requests.delete(relay["url"] + "/admin/projects/demo-project/marks", timeout=10).status_code == 401
    finally:
        stop_relay(relay)


def structured(event_id, version=7):
    return {
        "specversion": "1.0", "type": "google.firebase.remoteconfig.remoteConfig.v1.updated", "id": event_id,
        "source": "//firebaseremoteconfig.googleapis.com/projects/demo-project", "data": {"versionNumber": str(version)}}


@pytest.mark.parametrize("postgres", [False, True], ids=["in memory", "store.postgres"])
def test_ids_and_filters_with_control_characters_are_a_400(emulator, tmp_path, request, postgres):
    store = ""
    if postgres:
        database = request.getfixturevalue("cluster")
        store = f'store: {{postgres: {{url: "{database.url}", leaseSeconds: 3}}}}'
    relay = start_relay(emulator, tmp_path, relay_config(emulator, routes=PLAIN, store=store))
    headers = {"Authorization": f"Bearer {ADMIN}"}
    try:
        if postgres:
            relay["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
        for event_id in ("a\u0000b", "line\nbreak", "bell\u0007"):
            body = json.dumps(structured(event_id)).encode()
            answer = post(relay, body, {"Content-Type": "application/cloudevents+json"})
            assert answer.status_code == 400, answer.text
            assert answer.headers["Content-Type"] == "application/problem+json"
            assert "control character" in answer.json()["detail"]
        # The event with a clean id still goes.
        assert post(relay, json.dumps(structured("clean-id")).encode(), {"Content-Type": "application/cloudevents+json"}).status_code in (200, 202)
        for query in ("route=a%00b", "project=a%00b", "status=a%00b"):
            listed = requests.get(relay["url"] + "/admin/deliveries?" + query, headers=headers, timeout=10)
            assert listed.status_code == 400, (query, listed.text)
            assert listed.headers["Content-Type"] == "application/problem+json"
        one = requests.get(relay["url"] + "/admin/deliveries/a%00b", headers=headers, timeout=10)
        assert one.status_code == 400, one.text
        # The operator's page's filter too: signed in, a NUL in the route is a 400 page, not a store error.
        console = requests.Session()
        signed = console.post(relay["url"] + "/console/sign-in", data={"token": ADMIN}, allow_redirects=False, timeout=30)
        assert signed.status_code == 303, signed.text
        page = console.get(relay["url"] + "/console/deliveries?route=a%00b", timeout=10)
        assert page.status_code == 400 and "control character" in page.text, page.status_code
        # A statement PostgreSQL would refuse is not an outage: nothing was sent to it.
        assert "PostgreSQL did not answer" not in relay["proc"].output
    finally:
        stop_relay(relay)


@pytest.mark.parametrize("far", ["webhook", "admin send"])
def test_after_a_far_version_and_a_restart_later_versions_are_pinged_by_webhook_and_by_poll(emulator, tmp_path, cluster, far):
    """Issue #49: with `store.postgres` and polling on, a signed webhook whose version is int64's largest (an outlier,
    relayed) or an operator's `POST /admin/send` of version 500 on a project at version 1 reaches FCM; the relay is
    restarted (SIGTERM, the same database). What the take-over reads from the history must leave both out: the next
    real version's webhook is pinged and answered `delivered`, and the one after it, announced by no webhook, is found
    by the poll and pinged. (Before the fix, both stood down as superseded, and the webhook was answered `delivered`.)"""
    first = publish(emulator, "Hello")
    store = f'store: {{postgres: {{url: "{cluster.url}", leaseSeconds: 3}}}}'
    config = relay_config(emulator, routes=PLAIN, store=store)
    adopted = "adopted the current version without a ping"
    relay = start_relay(emulator, tmp_path, config)
    try:
        relay["proc"].wait_for(lambda line: adopted in line, timeout=60)
        if far == "webhook":
            far_version = INT64_MAX
            answer = post(relay, f'{{"versionNumber": {INT64_MAX}}}'.encode())
        else:
            far_version = 500
            answer = requests.post(relay["url"] + "/admin/send", json={"version": {"versionNumber": "500"}, "route": "stale"},
                                   headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert answer.status_code in (200, 202), answer.text
        assert until(lambda: ("PUSH_RC", str(far_version)) in pings(emulator), 30), pings(emulator)
    finally:
        stop_relay(relay)
    relay = start_relay(emulator, tmp_path, config)
    try:
        relay["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
        second = publish(emulator, "Hola")
        answer = post(relay, {"versionNumber": str(second)})
        assert answer.status_code in (200, 202), answer.text
        if answer.status_code == 200:
            assert answer.json()["status"] == "delivered", answer.text
        assert until(lambda: ("PUSH_RC", str(second)) in pings(emulator), 30), pings(emulator)
        third = publish(emulator, "Bonjour")
        assert until(lambda: ("PUSH_RC", str(third)) in pings(emulator), 60), pings(emulator)
        assert first < second < third < far_version
    finally:
        stop_relay(relay)


@pytest.mark.parametrize("storage", ["memory", "spool", "postgres"])
def test_a_burst_during_an_outage_pings_the_newest_version_alone(emulator, tmp_path, request, storage):
    """Issue #49, in every storage mode: three versions announced 200 ms apart while FCM answers 503. Once FCM is back,
    the newest alone reaches it: the older ones stand down behind it, and neither is ever sent after it (before the
    fix, the spool's sent N, then N+2, then N+1)."""
    store = ""
    delivery = ""
    if storage == "spool":
        delivery = f', spoolDirectory: "{tmp_path / "spool"}"'
    elif storage == "postgres":
        store = f'store: {{postgres: {{url: "{request.getfixturevalue("cluster").url}", leaseSeconds: 3}}}}'
    config = relay_config(emulator, routes=PLAIN, delivery=delivery, store=store)
    publish(emulator, "before")  # the first poll adopts it: the burst that follows is news
    relay = start_relay(emulator, tmp_path, config)
    try:
        relay["proc"].wait_for(lambda line: "adopted the current version without a ping" in line, timeout=60)
        requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "count": 12}, timeout=10).raise_for_status()
        versions = [publish(emulator, f"burst {n}") for n in range(3)]
        for version in versions:
            answer = post(relay, {"versionNumber": str(version)})
            # In memory nothing is kept: a delivery not done in time is a 503 its sender retries (docs/webhook.md),
            # and the delivery goes on meanwhile.
            kept = (200, 202) if storage != "memory" else (200, 202, 503)
            assert answer.status_code in kept, answer.text
        newest = str(versions[-1])
        assert until(lambda: ("PUSH_RC", newest) in pings(emulator), 60), pings(emulator)
        # Quiet: every older ping has ended (stood down), so nothing can follow the newest any more.
        def ended(version):
            return any("superseded" in line and f'"version":"{version}"' in line for line in relay["proc"].lines)
        assert until(lambda: all(ended(v) for v in versions[:-1]), 60), relay["proc"].output
        assert pings(emulator) == [("PUSH_RC", newest)], pings(emulator)
    finally:
        stop_relay(relay)
