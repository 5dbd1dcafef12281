"""Several replicas on one PostgreSQL, on the real binary: a throwaway cluster (initdb and pg_ctl in a temporary
directory, on a free port), two or three `rc-relay serve` processes on it, the real nginx of the deploy kit in front,
and the emulator recording what reaches FCM. The database and FCM's record decide. Where no event is pushed (a row
settled, readiness turned), the tests poll for that state itself with no upper bound but a generous deadline; they
never sleep for a fixed time in place of an event."""
import json
import signal
import time

import requests

from conftest import LINES, recorded, signed_headers, start_relay, stop_relay, until
from test_deploy import client_session, start_proxy, stop_proxy

ADMIN = "replica-admin-token-0123456789"


def config(cluster, routes="", attempts=8):
    return f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN}"]}}
delivery: {{answerWithinSeconds: 2, baseDelaySeconds: 0.2, maxDelaySeconds: 1, drainSeconds: 0.5, maxAttempts: {attempts}}}
store: {{postgres: {{url: "{cluster.url}", leaseSeconds: 6}}}}
{routes}
"""


def start_replicas(emulator, tmp_path, cluster, count, routes="", attempts=8):
    replicas = []
    for index in range(count):
        directory = tmp_path / f"replica-{index}"
        directory.mkdir()
        replicas.append(
            start_relay(emulator, directory, config(cluster, routes, attempts), server="{port: 0, trustedProxies: [127.0.0.1/32]}"))
    return replicas


def admin(replica, method, path):
    return requests.request(method, replica["url"] + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)


def holder(replicas, project="demo-project"):
    """The replica that took the project's lease, as its own log says (woken by each line a replica prints)."""

    def taken():
        return next((r for r in replicas if any("project lease taken" in line and project in line for line in r["proc"].lines)), None)

    with LINES:
        found = LINES.wait_for(taken, timeout=30)
    assert found, "no replica took the project's lease"
    return found


def leases_and_pings(replicas):
    """Each replica's lines about leases and pings, for a failure's message: who delivered what, under which lease
    (a burst once made a second ping in a full run, 2026-12-05, and nothing was kept to say why)."""
    words = ("lease", "ping", "quiet", "accepted", "fence", "sweep")
    return "\n".join(
        f"replica {index}: {line.strip()[:300]}"
        for index, replica in enumerate(replicas)
        for line in list(replica["proc"].lines)
        if any(word in line.lower() for word in words) and "/metrics" not in line)


def fail_fcm(emulator):
    """FCM answers 503 to every send from now on."""
    requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "count": 100000}, timeout=10)


def fcm_back(emulator):
    """FCM accepts sends again (the faults and what it recorded are cleared)."""
    requests.delete(emulator["url"] + "/emulator/messages", timeout=10)


def wait_ready(relay, ready):
    """Polls /readyz until it says `ready`: readiness is a state the relay prints no line for."""
    deadline = time.time() + 30
    while (requests.get(relay["url"] + "/readyz", timeout=10).status_code == 200) != ready:
        assert time.time() < deadline, f"readiness did not turn {ready}"
        time.sleep(0.1)


def send(url, version, msg_id=None, session=None):
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
    headers = {"Content-Type": "application/json", **signed_headers(body, msg_id)}
    return (session or requests).post(url, data=body, headers=headers, timeout=30)


def versions_sent(emulator):
    return [m["message"]["data"]["CONFIG_VERSION"] for m in recorded(emulator)]


ROUTES = """
routes:
  - name: stale
    topic: PUSH_RC
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
"""


def test_replicas_starting_at_once_migrate_once(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 3)
    try:
        holder(replicas)
        assert cluster.sql("SELECT string_agg(version::text, ',' ORDER BY version) FROM rc_relay_schema") == "1,2,3,4,5,6,7,8,9,10,11,12"
        # The replica that migrated says so after its commit, and the holder may be another, quicker to its lease.
        def migrated():
            return [r for r in replicas if any("database schema migrated" in line for line in r["proc"].lines)]

        assert until(lambda: len(migrated()) == 1, 30), f"{len(migrated())} replicas said they migrated the schema"
        # One holder per project, whichever replica it is.
        assert cluster.sql("SELECT count(*) FROM rc_relay_held") == "1"
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_a_redelivery_to_another_replica_sends_nothing(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 2, ROUTES)
    proxy = None
    try:
        delivering = holder(replicas)
        other = next(r for r in replicas if r is not delivering)
        upstream = ";\n    server ".join(r["url"].removeprefix("http://") for r in replicas)
        proxy = start_proxy("nginx", tmp_path / "nginx", upstream)
        session = client_session()
        session.verify = proxy["cert"]
        # The holder answers its own webhooks with their outcome (its own NOTIFY does not make them duplicates).
        own = send(delivering["webhook"], 40)
        assert own.status_code == 200, own.text
        assert own.json()["duplicate"] is False
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        fcm_back(emulator)  # forget what FCM recorded so far
        # The sender's first try reaches the replica that does not deliver: committed to the outbox, 202.
        first = send(other["webhook"], 41, msg_id="msg_redelivered")
        assert first.status_code == 202, first.text
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "2")
        assert versions_sent(emulator) == ["41"]
        # Its retries, through nginx to whichever replica, and to each directly: the same event, nothing sent again.
        for url in [proxy["url"] + "/webhooks/remote-config", delivering["webhook"], other["webhook"]]:
            again = send(url, 41, msg_id="msg_redelivered", session=session if url.startswith("https") else None)
            assert again.status_code == 200, again.text
            assert again.json()["duplicate"] is True
        assert versions_sent(emulator) == ["41"]
        # One row, known by its version and its webhook-id (hashed), and no third key for the same id.
        assert cluster.sql(
            "SELECT keys || ' ' || (key_version = rc_relay_key('demo-project/version/41'))::text || ' ' || (key_id IS NULL)::text || ' ' "
            "|| (key_webhook = rc_relay_key('webhook/msg_redelivered'))::text FROM rc_relay_outbox WHERE version = 41"
        ) == '["demo-project/version/41","webhook/msg_redelivered"] true true true'
    finally:
        if proxy:
            stop_proxy(proxy)
        for replica in replicas:
            stop_relay(replica)


def test_any_replica_lists_shows_and_discards_every_replicas_pings(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 2, ROUTES, attempts=2)
    try:
        delivering = holder(replicas)
        other = next(r for r in replicas if r is not delivering)
        # Sent to the replica that does not deliver: the holder's ping is in the other's admin API.
        assert send(other["webhook"], 60).status_code == 202
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        # The holder copies its history to the store after it settles the event, in a statement of its own.
        assert until(lambda: [(d["route"], d["status"]) for d in admin(other, "GET", "/admin/deliveries?version=60").json()["deliveries"]]
                     == [("stale", "accepted")], 60), "the holder's accepted ping never reached the other's list"
        listed = admin(other, "GET", "/admin/deliveries?version=60")
        assert listed.status_code == 200, listed.text
        [ping] = listed.json()["deliveries"]
        assert (ping["route"], ping["status"], ping["versionNumber"]) == ("stale", "accepted", "60")
        shown = admin(other, "GET", f"/admin/deliveries/{ping['id']}")
        assert shown.status_code == 200 and shown.json() == ping
        # Which replica sent it (docs/replicas.md): the holder's process, as its lease names it.
        assert ping["replica"].split("/")[1] == str(delivering["proc"].proc.pid), ping
        assert cluster.sql(f"SELECT count(*) FROM rc_relay_leases WHERE holder = '{ping['replica']}'") == "1"
        # A ping that goes dead on the holder is discarded through the other replica: passed on, applied there.
        fail_fcm(emulator)
        assert send(other["webhook"], 61).status_code == 202
        delivering["proc"].wait_for(lambda line: "ping is dead" in line, timeout=60)
        # The history copy that says so reaches the store after the line, in a statement of its own.
        assert until(lambda: admin(other, "GET", "/admin/deliveries?version=61&status=dead").json()["deliveries"], 60), \
            "the holder's dead ping never reached the other's list"
        # Each parked retry of the event is a new ping in the list: the newest is the one to discard.
        dead = admin(other, "GET", "/admin/deliveries?version=61&status=dead").json()["deliveries"][0]
        discarded = admin(other, "POST", f"/admin/deliveries/{dead['id']}/discard")
        assert discarded.status_code == 202, discarded.text
        delivering["proc"].wait_for(lambda line: "admin discard applied" in line, timeout=30)
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "2")
        # Asked again on the holder, where nothing waits for it any more: refused.
        again = admin(delivering, "POST", f"/admin/deliveries/{dead['id']}/discard")
        assert again.status_code == 409, again.text
        # A ping nobody kept is 404 on every replica.
        for replica in replicas:
            assert admin(replica, "GET", "/admin/deliveries/nowhere-1").status_code == 404
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_a_burst_across_replicas_makes_one_ping(emulator, tmp_path, cluster):
    # Each version's quiet period must still run when the next one reaches the holder (through another replica, maybe):
    # 20 s, far more than one send takes on a slow machine.
    routes = ROUTES.replace("    data:", "    debounceSeconds: 20\n    data:")
    replicas = start_replicas(emulator, tmp_path, cluster, 3, routes)
    try:
        holder(replicas)
        # Ten publishes in quick succession, spread over the three replicas: the holder's quiet period coalesces them.
        for index, version in enumerate(range(50, 60)):
            answer = send(replicas[index % 3]["webhook"], version)
            assert answer.status_code == 202, answer.text
        # The newest settles once its own 20 s quiet period has passed.
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "10", timeout=120)
        assert versions_sent(emulator) == ["59"], leases_and_pings(replicas)
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_kill_9_of_the_delivering_replica_is_recovered_by_another(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 2, ROUTES)
    try:
        delivering = holder(replicas)
        survivor = next(r for r in replicas if r is not delivering)
        fail_fcm(emulator)
        answer = send(delivering["webhook"], 70)
        assert answer.status_code == 202, answer.text  # committed; FCM is failing, so it retries
        delivering["proc"].wait_for(lambda line: "retrying" in line.lower() or "503" in line)
        delivering["proc"].proc.send_signal(signal.SIGKILL)
        delivering["proc"].proc.wait(timeout=10)
        fcm_back(emulator)
        survivor["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        assert versions_sent(emulator) == ["70"]
    finally:
        for replica in replicas:
            if replica["proc"].proc.poll() is None:
                stop_relay(replica)


def test_a_database_outage_refuses_webhooks_and_recovers(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 1, ROUTES)
    relay = replicas[0]
    try:
        holder(replicas)
        cluster.stop()
        refused = send(relay["webhook"], 80)
        assert refused.status_code == 503, refused.text
        assert refused.headers["Content-Type"] == "application/problem+json"
        assert int(refused.headers["Retry-After"]) > 0
        assert cluster.url not in refused.text and str(cluster.port) not in refused.text
        wait_ready(relay, False)
        cluster.start()
        # The lease lapsed during the outage: the replica takes it again, and only then delivers here.
        # Its log lines in order: the first "taken" at start, the second after the outage.
        relay["proc"].wait_for(lambda line: "project lease taken" in line)
        relay["proc"].wait_for(lambda line: "project lease taken" in line)
        wait_ready(relay, True)
        # The sender's retry: accepted now, delivered once.
        again = send(relay["webhook"], 80)
        assert again.status_code == 200, again.text
        assert versions_sent(emulator) == ["80"]
    finally:
        stop_relay(relay)


def test_a_database_restart_mid_delivery_loses_and_duplicates_nothing(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 2, ROUTES)
    try:
        delivering = holder(replicas)
        fail_fcm(emulator)
        answer = send(delivering["webhook"], 90)
        assert answer.status_code == 202, answer.text
        cluster.stop()
        cluster.start()
        fcm_back(emulator)
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        assert versions_sent(emulator) == ["90"]
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_a_database_outage_longer_than_the_lease_sends_nothing_twice(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 2, ROUTES)
    try:
        delivering = holder(replicas)
        fail_fcm(emulator)
        answer = send(delivering["webhook"], 95)
        assert answer.status_code == 202, answer.text
        cluster.stop()
        # The holder cannot renew: it stops delivering before its lease can pass to the other replica.
        delivering["proc"].wait_for(lambda line: "project lease lapsed" in line, timeout=60)
        fcm_back(emulator)
        cluster.start()
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        assert versions_sent(emulator) == ["95"]
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_a_stop_while_the_database_is_away_still_ends(emulator, tmp_path, cluster):
    replicas = start_replicas(emulator, tmp_path, cluster, 1, ROUTES)
    relay = replicas[0]
    holder(replicas)
    fail_fcm(emulator)
    assert send(relay["webhook"], 99).status_code == 202
    cluster.stop()
    relay["proc"].proc.send_signal(signal.SIGTERM)
    # It ends by itself (drainSeconds 0.5 + the outbox's flush, at most min(lease, 5 s) + the stop margin), and says
    # why it left its lease to expire.
    assert relay["proc"].proc.wait(timeout=60) == 0
    assert "leases left to expire" in relay["proc"].output
    stop_relay(relay)
