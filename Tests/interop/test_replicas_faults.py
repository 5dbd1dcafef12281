"""Replicas through the faults of a rolling deploy, a paused machine and a database stall (issue 32's defects), on the
real binary: a throwaway PostgreSQL cluster, two `rc-relay serve` processes and the emulator, which records what reaches
FCM and decides. Each test waits for the events themselves (a line printed, a row settled, a request the emulator
counted); pauses are the faults, never a stand-in for an event."""
import collections
import concurrent.futures
import json
import signal
import socket
import subprocess
import threading
import time

import requests

from conftest import recorded, signed_headers, start_relay, stop_relay, until
from test_replicas import ADMIN, ROUTES, holder, send, versions_sent, wait_ready


def config(cluster, routes=ROUTES, lease=3, extra=""):
    return f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
admin: {{tokens: ["{ADMIN}"]}}
delivery: {{answerWithinSeconds: 2, baseDelaySeconds: 0.2, maxDelaySeconds: 1, drainSeconds: 0.5, maxAttempts: 8}}
store: {{postgres: {{url: "{cluster.url}", leaseSeconds: {lease}}}}}
{routes}
{extra}
"""


def start(emulator, tmp_path, name, text, env=None):
    directory = tmp_path / name
    directory.mkdir()
    return start_relay(emulator, directory, text, server="{port: 0}")


def stats(emulator):
    return requests.get(emulator["url"] + "/emulator/stats", timeout=10).json()


def wait_until(predicate, what, timeout=60):
    """Waits for a state no process prints a line for (conftest.until)."""
    assert until(predicate, timeout), f"{what} did not happen"


def leases_held(cluster):
    """How many leases are held now; None before the relays have made their tables."""
    try:
        return cluster.sql("SELECT count(*) FROM rc_relay_held")
    except subprocess.CalledProcessError:
        return None


def publish(emulator, project, greeting):
    template = {"parameters": {"welcome": {"defaultValue": {"value": greeting}, "valueType": "STRING"}}}
    answer = requests.post(f"{emulator['url']}/emulator/remote-config/{project}/publish", json=template, timeout=10)
    assert answer.ok, answer.text
    return int(answer.json()["versionNumber"])


def test_a_paused_holder_sends_nothing_after_it_wakes(emulator, tmp_path, cluster):
    """Defect 2: the holder's request for v is under way when it is paused past its lease; the other replica takes over
    and delivers v; the stale holder wakes to a failed request and must not retry it (fencing)."""
    replicas = [start(emulator, tmp_path, f"r{i}", config(cluster)) for i in range(2)]
    try:
        paused = holder(replicas)
        other = next(r for r in replicas if r is not paused)
        # FCM answers the first request slowly, then with a 503: the holder will want to retry it.
        requests.post(emulator["url"] + "/emulator/faults", json={"status": 503, "latencyMs": 1500, "count": 1}, timeout=10)
        answers = []
        sender = threading.Thread(target=lambda: answers.append(send(paused["webhook"], 100)))
        sender.start()
        wait_until(lambda: stats(emulator)["sendRequests"] >= 1, "the holder's request to FCM")
        paused["proc"].proc.send_signal(signal.SIGSTOP)
        try:
            other["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
            wait_until(lambda: versions_sent(emulator) == ["100"], "the new holder's delivery")
            cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        finally:
            paused["proc"].proc.send_signal(signal.SIGCONT)
        paused["proc"].wait_for(lambda line: "project lease lost to another replica" in line, timeout=60)
        sender.join(timeout=60)
        # The stale holder's own answer came after the pause: it was acknowledged (a 202) and never sent again.
        assert answers and answers[0].status_code in (200, 202), answers
        metrics = requests.get(paused["url"] + "/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).text
        assert 'rc_relay_store_lease_stand_downs_total{project="demo-project",reason="taken_over"}' in metrics
        # Whatever the stale holder was going to do after waking, it did before its stop ends: stop it, then count.
        stop_relay(paused)
        assert versions_sent(emulator) == ["100"]
    finally:
        for replica in replicas:
            if replica["proc"].proc.poll() is None:
                stop_relay(replica)


def test_a_new_holder_pings_a_version_published_during_the_hand_over(emulator, tmp_path, cluster):
    """Defect 1: the holder polled and adopted v1; v2 is published with no webhook; the holder dies before its next
    poll. The replica that takes the lease over starts from the version relayed on record (1), not from Remote
    Config's current one, and pings v2 once."""
    project = "demo-project"
    first = publish(emulator, project, "Hello")
    poll = f"poll: {{intervalSeconds: 3600, graceSeconds: 0}}\nremoteConfig: {{baseURL: \"{emulator['url']}\"}}"
    old = start(emulator, tmp_path, "old", config(cluster, extra=poll))
    old["proc"].wait_for(lambda line: "adopted the current version without a ping" in line, timeout=60)
    assert cluster.sql(f"SELECT relayed FROM rc_relay_marks WHERE project = '{project}'") == str(first)
    second = publish(emulator, project, "Hola")
    old["proc"].proc.send_signal(signal.SIGKILL)
    old["proc"].proc.wait(timeout=10)
    new = start(emulator, tmp_path, "new", config(cluster, extra=poll))
    try:
        new["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
        assert versions_sent(emulator) == [str(second)]
        assert "adopted the current version" not in new["proc"].output
        assert cluster.sql(f"SELECT relayed FROM rc_relay_marks WHERE project = '{project}'") == str(second)
    finally:
        stop_relay(new)


def test_a_holder_that_took_a_project_with_nothing_pending_reads_what_fcm_accepted_before_its_first_event(
        emulator, tmp_path, cluster):
    """Issue #52: a lease taken with nothing pending is not swept (10,000 taken at a start would be 10,000 sweeps), so
    the new holder reads what FCM accepted under the previous holder when the project's first event comes: an older
    version arriving late after v51 was accepted and its holder killed is not pinged after it."""
    first = start(emulator, tmp_path, "first", config(cluster))
    holder([first])
    answer = send(first["webhook"], 51)
    assert answer.status_code == 200, answer.text
    cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "1")
    # The history's copy of the ping is written moments after it, in its event's row (riding the settlement, its
    # report left in the row's reports) or apart when it missed it: the new holder reads it from either place.
    cluster.wait_for("SELECT (SELECT count(*) FROM rc_relay_outbox WHERE pings IS NOT NULL AND reports LIKE '%\"accepted\"%')"
                     " + (SELECT count(*) FROM rc_relay_pings WHERE status = 'accepted')", "1")
    first["proc"].proc.send_signal(signal.SIGKILL)
    first["proc"].proc.wait(timeout=10)
    second = start(emulator, tmp_path, "second", config(cluster))
    try:
        second["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
        wait_ready(second, True)
        late = send(second["webhook"], 50)
        assert late.status_code == 200, late.text
        assert versions_sent(emulator) == ["51"], late.text
        # Nothing was pending when the lease was taken, so no sweep delivered anything from the outbox.
        assert "delivering an event from the outbox" not in second["proc"].output
    finally:
        stop_relay(second)


def test_after_a_database_stall_no_older_version_follows_a_newer_one(emulator, tmp_path, cluster):
    """Defect 8: ten versions arrive while PostgreSQL is stopped (each answered 503, nothing acknowledged); their
    senders retry afterwards in another order. An older version never follows a newer one to the same audience."""
    relay = start(emulator, tmp_path, "only", config(cluster))
    try:
        holder([relay])
        cluster.stop()
        for version in range(717, 727):
            assert send(relay["webhook"], version).status_code == 503
        cluster.start()
        relay["proc"].wait_for(lambda line: "project lease taken" in line)
        wait_ready(relay, True)
        # The senders' retries, one after another, in another order: each answered once its delivery settles.
        for version in [719, 721, 717, 726, 718, 720, 722, 723, 724, 725]:
            answer = send(relay["webhook"], version)
            assert answer.status_code == 200, answer.text
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "10")
        assert [int(v) for v in versions_sent(emulator)] == [719, 721, 726]
    finally:
        stop_relay(relay)


def test_a_new_holder_sends_only_the_newest_of_the_versions_its_outbox_holds(emulator, tmp_path, cluster):
    """Defect 8, across replicas: while the holder is frozen, five versions are admitted by the other replica; the
    holder is killed, and the replica that takes over finds five pending versions for one audience: it sends the
    newest, and the older ones end `superseded`."""
    # A long lease: the five versions must reach the other replica while the frozen holder's lease still stands (a
    # 3 s lease could lapse on a slow machine, and the other would then deliver them itself).
    replicas = [start(emulator, tmp_path, f"r{i}", config(cluster, lease=30)) for i in range(2)]
    try:
        frozen = holder(replicas)
        other = next(r for r in replicas if r is not frozen)
        frozen["proc"].proc.send_signal(signal.SIGSTOP)
        for version in range(10, 15):
            assert send(other["webhook"], version).status_code == 202
        frozen["proc"].proc.send_signal(signal.SIGKILL)
        frozen["proc"].proc.wait(timeout=10)
        # The lease lapses up to 30 s after the kill, and the other's next renewal round (every 7.5 s) takes it.
        other["proc"].wait_for(lambda line: "project lease taken" in line, timeout=120)
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE settled", "5")
        assert versions_sent(emulator) == ["14"]
        superseded = requests.get(
            other["url"] + "/admin/deliveries?status=superseded", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).json()
        assert sorted(int(d["versionNumber"]) for d in superseded["deliveries"]) == [10, 11, 12, 13]
    finally:
        for replica in replicas:
            if replica["proc"].proc.poll() is None:
                stop_relay(replica)


def send_cloudevent(url, project, version):
    """A signed binary-mode CloudEvent for the project's version, as Eventarc sends it."""
    body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
    headers = {
        "Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": f"evt-{project}-{version}",
        "ce-type": "google.firebase.remoteconfig.remoteConfig.v1.updated",
        "ce-source": f"//firebaseremoteconfig.googleapis.com/projects/{project}", **signed_headers(body)}
    return requests.post(url, data=body, headers=headers, timeout=30)


class DelayingProxy:
    """A TCP proxy on loopback that holds every chunk `delay` seconds each way (a database in another zone)."""

    def __init__(self, port, delay):
        self.upstream, self.delay = port, delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    def pipe(self, source, target):
        try:
            while chunk := source.recv(65536):
                time.sleep(self.delay)  # the fault itself: each chunk crosses a slow link
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, target):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.server.close()


def test_two_hundred_projects_keep_their_leases_behind_a_slow_database(emulator, tmp_path, cluster):
    """Defect 3: with the database 50 ms away (a round trip), one statement renews every lease: a replica holding 200
    projects keeps them all, and a webhook for any of them is delivered and answered 200 by the holder."""
    proxy = DelayingProxy(cluster.port, 0.025)
    url = cluster.url.replace(f":{cluster.port}/", f":{proxy.port}/")
    projects = "projects:\n" + "".join(f"  - id: p{index}\n" for index in range(200))
    text = config(cluster, lease=3, extra=projects).replace(cluster.url, url)
    relay = start(emulator, tmp_path, "far", text)
    try:
        wait_until(lambda: leases_held(cluster) == "200", "200 leases taken")
        # Several renewal rounds (lease / 4 = 0.75 s each) pass; the relay must hold all 200 throughout.
        renewed = cluster.sql("SELECT max(expires_at) FROM rc_relay_held")
        wait_until(lambda: cluster.sql("SELECT min(expires_at) FROM rc_relay_held") > renewed, "every lease renewed")
        for index in (0, 99, 199):
            answer = send_cloudevent(relay["webhook"], f"p{index}", 500 + index)
            assert answer.status_code == 200, answer.text
        # The last request's access line is written as its answer leaves: once it is read, so is every line before it.
        relay["proc"].wait_for(lambda line: '"msg":"request"' in line and answer.headers["x-request-id"] in line)
        assert "project lease lapsed" not in relay["proc"].output
        assert cluster.sql("SELECT count(*) FROM rc_relay_held") == "200"
    finally:
        stop_relay(relay)
        proxy.close()


AWARE = """
routes:
  - name: aware
    topic: RC_ALL
    audience: {lang_ja: lang_ja}
    data: {CONFIG_STATE: STALE, CONFIG_VERSION: "{{version}}"}
"""


def publish_template(emulator, default, japanese):
    template = {
        "conditions": [{"name": "lang_ja", "expression": "device.language in ['ja']"}],
        "parameters": {"welcome": {"defaultValue": {"value": default}, "conditionalValues": {"lang_ja": {"value": japanese}}}},
    }
    answer = requests.post(f"{emulator['url']}/emulator/remote-config/demo-project/publish", json=template, timeout=10)
    assert answer.ok, answer.text
    return int(answer.json()["versionNumber"])


def test_an_outbox_event_is_measured_from_the_newest_version_relayed(emulator, tmp_path, cluster):
    """Found by the fault campaign (seed 20261126): a version left for the poller changed the default; the next one,
    which changed only Japanese values, reached the other replica and was delivered by the holder from the outbox. Its
    change must be measured from the newest version relayed (1), not from the one before it (2), so the whole audience
    hears of the default's change."""
    remote = f"remoteConfig: {{baseURL: \"{emulator['url']}\"}}"
    replicas = [start(emulator, tmp_path, f"r{i}", config(cluster, routes=AWARE, extra=remote)) for i in range(2)]
    try:
        delivering = holder(replicas)
        other = next(r for r in replicas if r is not delivering)
        first = publish_template(emulator, "Hello", "Konnichiwa")
        assert send(delivering["webhook"], first).status_code == 200
        cluster.wait_for("SELECT relayed FROM rc_relay_marks WHERE project = 'demo-project'", str(first))
        publish_template(emulator, "Hola", "Konnichiwa")  # the default changes; no webhook announces it
        third = publish_template(emulator, "Hola", "Ohayo")  # only Japanese values change
        assert send(other["webhook"], third).status_code == 202
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE NOT settled", "0")
        pings = [(m["message"].get("topic") or m["message"].get("condition"), m["message"]["data"]["CONFIG_VERSION"]) for m in recorded(emulator)]
        assert ("RC_ALL", str(third)) in pings, pings
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_a_replica_that_missed_a_marks_reset_applies_it_at_its_next_renewal(emulator, tmp_path, cluster):
    """Issue #50: a reset of a project's marks reached the other replicas only by NOTIFY, and the admin call answered
    200 all the same. One whose listener was reconnecting kept its marks. The reset is a durable generation now: a
    replica that missed the notice applies it at its next renewal."""
    replicas = [start(emulator, tmp_path, f"r{i}", config(cluster)) for i in range(2)]
    try:
        for replica in replicas:
            wait_ready(replica, True)
        asked, missed = replicas
        applied = "admin reset of the project's version marks applied"

        def reads_of_marks():
            metrics = requests.get(missed["url"] + "/metrics", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10).text
            counts = [line for line in metrics.splitlines() if line.startswith("rc_relay_store_statement_duration_seconds_count")
                      and 'statement="marks"' in line]
            return sum(float(line.rsplit(" ", 1)[1]) for line in counts)

        # It has read where the project's marks stand (at a renewal) before the reset: a replica that starts after a
        # reset has no marks from before it to forget.
        wait_until(lambda: reads_of_marks() >= 1, "the missing replica's first read of the marks")
        # The missing replica is paused and its notices' connections are ended meanwhile: it cannot listen again before
        # the reset is done, so the notice never reaches it.
        missed["proc"].proc.send_signal(signal.SIGSTOP)
        try:
            assert cluster.sql(
                "SELECT count(pg_terminate_backend(pid)) > 0 FROM pg_stat_activity WHERE query LIKE 'LISTEN \"rc_relay_resets\"%'") == "t"
            answer = requests.delete(
                asked["url"] + "/admin/projects/demo-project/marks", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
            assert answer.status_code == 200, answer.text
            assert cluster.sql("SELECT generation FROM rc_relay_marks WHERE project = 'demo-project'") == "1"
        finally:
            missed["proc"].proc.send_signal(signal.SIGCONT)
        missed["proc"].wait_for(lambda line: applied in line, timeout=60)
    finally:
        for replica in replicas:
            stop_relay(replica)


def test_a_replica_that_just_started_checks_a_far_version_against_the_shared_mark(emulator, tmp_path, cluster):
    """Issue #50: the outlier check compared a version with what the receiving replica had seen itself, which is
    nothing right after a start. It compares with the newest version relayed on record now: for a project whose mark is
    150,000, version 150,005 is an ordinary version (and moves the mark), whatever replica receives it."""
    first = start(emulator, tmp_path, "r0", config(cluster))
    try:
        first["proc"].wait_for(lambda line: "project lease taken" in line, timeout=60)
    finally:
        stop_relay(first)
    cluster.sql("INSERT INTO rc_relay_marks (project, relayed) VALUES ('demo-project', 150000) "
                "ON CONFLICT (project) DO UPDATE SET relayed = 150000")
    fresh = start(emulator, tmp_path, "r1", config(cluster))
    try:
        answer = send(fresh["webhook"], 150005)
        assert answer.status_code in (200, 202), answer.text
        cluster.wait_for("SELECT relayed FROM rc_relay_marks WHERE project = 'demo-project'", "150005")
        assert not fresh["proc"].saw("version far beyond the newest known one", timeout=0)
        assert versions_sent(emulator) == ["150005"]
    finally:
        stop_relay(fresh)


def test_redeliveries_to_both_replicas_at_once_deadlock_nothing(emulator, tmp_path, cluster):
    """Issue #50, defect 1: two replicas serving 8 projects, CloudEvents of which every other one reaches both replicas
    at once (as Eventarc's retries do); two admission rounds took the same keys in different orders, and PostgreSQL
    logged `deadlock detected` (a sender got a 503 after a stall). A round now inserts its events in the order of
    their keys' hashes: no deadlock, no 5xx, every event admitted once, every version sent once."""
    projects = "projects:\n" + "".join(f"  - id: p{index}\n" for index in range(8))
    replicas = [start(emulator, tmp_path, f"r{i}", config(cluster, extra=projects)) for i in range(2)]
    try:
        wait_until(lambda: leases_held(cluster) == "8", "8 leases taken")
        answers = []

        def event(index):
            project, version = f"p{index % 8}", 1000 + index
            body = json.dumps({"versionNumber": str(version), "updateType": "INCREMENTAL_UPDATE"}).encode()
            headers = {
                "Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": f"evt-{project}-{version}",
                "ce-type": "google.firebase.remoteconfig.remoteConfig.v1.updated",
                "ce-source": f"//firebaseremoteconfig.googleapis.com/projects/{project}",
                **signed_headers(body, f"msg_{project}_{version}")}
            targets = [r["webhook"] for r in replicas] if index % 2 else [replicas[index % 2]["webhook"]]
            threads = [threading.Thread(target=lambda url=url: answers.append(
                requests.post(url, data=body, headers=headers, timeout=60).status_code)) for url in targets]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(event, range(600)))
        assert len(answers) == 900
        assert all(status in (200, 202) for status in answers), collections.Counter(answers)
        assert cluster.sql("SELECT count(*) FROM rc_relay_outbox") == "600"
        cluster.wait_for("SELECT count(*) FROM rc_relay_outbox WHERE NOT settled", "0", timeout=120)
        log = (cluster.dir / "log").read_text()
        assert "deadlock detected" not in log
    finally:
        for replica in replicas:
            stop_relay(replica)
