"""The fault campaign (campaign.py): short campaigns on the real binary, the checker on synthetic data, and proof that
the checker catches a relay without fencing. A campaign decides by polled state (rc_relay_events, the emulator's
counters, the senders' answers) and by the lines the processes print; the only sleeps are the fault plan's own (how
long a pause lasts)."""
import io
import random
import time

import pytest

import campaign
from campaign import ROUTES, Options, check, report
from conftest import require
from conftest import until as eventually
from postgres import Missing

T0 = 1_800_000_000.0


def run_or_fail(options, script=None):
    """Runs a campaign; PostgreSQL missing is a failure that names the package (.ci/run installs it)."""
    require("postgresql", program=False)
    require("nginx")
    try:
        return campaign.run(options, script=script)
    except Missing as missing:
        pytest.fail(f"{missing}: the fault campaign needs it (scripts/test installs it)")


def printed(checks, record):
    out = io.StringIO()
    ok = report(checks, record, out=out)
    print(out.getvalue())
    return ok, out.getvalue()


# ---------------------------------------------------------------------------------------------------------------
# Short campaigns on the binary (about 100 s each on two cores)
# ---------------------------------------------------------------------------------------------------------------


def test_a_short_campaign_with_a_fixed_seed(tmp_path):
    checks, record = run_or_fail(Options(seed=20261126, minutes=1.2, directory=tmp_path / "campaign"))
    ok, text = printed(checks, record)
    assert record["faults"], "the plan injected no fault"
    assert ok, text


def test_a_short_campaign_with_a_random_seed(tmp_path):
    seed = random.SystemRandom().randrange(1, 1_000_000)
    print(f"campaign seed {seed}")
    checks, record = run_or_fail(Options(seed=seed, minutes=1.2, directory=tmp_path / "campaign"))
    ok, text = printed(checks, record)
    assert ok, f"seed {seed}:\n{text}"


def paused_holder_wakes_after_a_take_over(run, until):
    """The holder of the first project is paused while its pings are in flight to a slow FCM, for three leases;
    another replica takes over and delivers a newer version; the holder wakes with wave turns and a quiet period
    due. With fencing it sends nothing more; without it, it sends its older version after the newer one."""
    project = run.projects[0]
    holder = run.holders()[project]
    emulator = run.emulators[project]
    run.inject("fcm_slow", project, {"latencyMs": 1000, "count": 3})
    before = emulator.stats().get("sendRequests", 0)
    run.publish(project, ["default"], "bare", rng=random.Random(1))
    # The holder's first ping is on its way to FCM.
    assert eventually(lambda: emulator.stats().get("sendRequests", 0) > before, 30), "the holder sent nothing"
    lease = run.options.lease
    pause = threading_pause(run, holder, 3 * lease)
    # Another replica takes the lease once it expires: the newer version goes to it, never to the paused holder.
    taken = wait_for_other_holder(run, project, holder, timeout=6 * lease)
    run.publish(project, ["default"], "bare", rng=random.Random(2), avoid=holder.name)
    pause.join()
    assert taken, "no replica took the paused holder's lease"


def threading_pause(run, replica, seconds):
    import threading
    thread = threading.Thread(target=run.pause, args=(replica, "holder, paused while FCM is slow", seconds))
    thread.start()
    return thread


def wait_for_other_holder(run, project, holder, timeout):
    def other():
        now = run.holders().get(project)
        return now is not None and now is not holder

    return eventually(other, timeout)


def test_the_checker_catches_a_paused_holder_without_fencing(tmp_path):
    # RC_RELAY_TESTING_DISABLE_FENCING=1 switches off the lease check before each FCM request. The checker must see
    # what that costs: the woken holder's older version after the newer one, or a ping twice with no fault in flight.
    options = Options(seed=1, minutes=0, projects=1, lease=4, fencing=False, directory=tmp_path / "campaign")
    checks, record = run_or_fail(options, script=paused_holder_wakes_after_a_take_over)
    ok, text = printed(checks, record)
    failed = {c.invariant for c in checks if not c.ok}
    assert not ok and failed & {"stale", "duplicates", "newest", "waves"}, text


def test_the_same_sequence_with_fencing_passes(tmp_path):
    # The control: the relay as shipped stands the woken holder down before any request, and the pings that were in
    # flight at the pause and went again from the new holder are the documented exception.
    options = Options(seed=1, minutes=0, projects=1, lease=4, directory=tmp_path / "campaign")
    checks, record = run_or_fail(options, script=paused_holder_wakes_after_a_take_over)
    ok, text = printed(checks, record)
    assert ok, text


# ---------------------------------------------------------------------------------------------------------------
# The checker on synthetic data
# ---------------------------------------------------------------------------------------------------------------

PROJECT = "p"


def ping(route, audience, version, at, condition=False):
    message = {"data": {"CONFIG_STATE": "STALE", "CONFIG_VERSION": str(version), "ROUTE": route}}
    message["condition" if condition else "topic"] = audience
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(T0 + at)) + f".{int(round((at % 1) * 1000)):03d}Z"
    return {"name": f"m{at}", "project": PROJECT, "receivedAt": stamp,
            "message": message}


def publish(version, at, changed=("default",), mode="bare"):
    return {"project": PROJECT, "version": version, "time": T0 + at, "mode": mode, "changed": list(changed), "polling": True}


def answer(version, at, status=202):
    return {"project": PROJECT, "version": version, "time": T0 + at, "status": status, "target": "replica-0", "webhook_id": f"w{version}"}


def full_delivery(version, at, aware="RC_ALL"):
    """Every route's pings of a version, as a healthy relay sends them."""
    return [ping("plain", "PUSH_RC", version, at), ping("aware", aware, version, at), ping("quiet", "RC_QUIET", version, at + 2)] + [
        ping("waved", f"RC_WAVE_{k}", version, at + k) for k in range(4)]


def fault(kind, at, end=None):
    return {"kind": kind, "target": "replica-0", "start": T0 + at, "end": T0 + (end if end is not None else at), "detail": {}}


def failures(messages, answers, publishes, faults=()):
    checks = check(messages, answers, publishes, list(faults), ROUTES, {"quiet": True})
    return {(c.invariant, c.scope) for c in checks if not c.ok}, checks


def test_a_healthy_history_passes():
    publishes = [publish(2, 0), publish(3, 10)]
    messages = full_delivery(2, 1) + full_delivery(3, 11)
    failed, checks = failures(messages, [answer(2, 0.5), answer(3, 10.5)], publishes)
    assert failed == set()
    ok, text = printed(checks, {"seed": 0, "faults": [], "publishes": publishes, "answers": [], "messages": messages})
    assert ok and text.rstrip().endswith(f"{len(checks)} passed, 0 failed")


def test_a_lost_acknowledged_version_is_caught():
    # Version 2 changed only Japanese devices' values; 3 only Korean ones: 3's ping to lang_ko does not cover lang_ja.
    publishes = [publish(2, 0, changed=["ios_ja"]), publish(3, 10, changed=["ios_ko"])]
    messages = full_delivery(3, 11, aware="lang_ko") + [m for m in full_delivery(2, 1) if m["message"]["data"]["ROUTE"] != "aware"]
    failed, _ = failures(messages, [answer(2, 0.5), answer(3, 10.5)], publishes)
    assert ("lost", "aware") in failed
    # A narrowed condition to both languages, or the whole topic, covers it.
    both = [ping("aware", "'lang_ja' in topics || 'lang_ko' in topics", 3, 12, condition=True)]
    assert ("lost", "aware") not in failures(messages + both, [answer(2, 0.5), answer(3, 10.5)], publishes)[0]


def test_a_version_left_for_the_poller_and_never_pinged_is_lost():
    publishes = [publish(2, 0), publish(3, 10, mode="poll"), publish(4, 20, changed=["ios_ja"])]
    messages = full_delivery(2, 1) + full_delivery(4, 21, aware="lang_ja")
    failed, checks = failures(messages, [answer(2, 0.5), answer(4, 20.5)], publishes)
    # 4 covers 3 on every route but the aware one: 3 changed the default (everyone), 4 only reached lang_ja.
    assert failed == {("lost", "aware")}
    assert "left for the poller" in next(c for c in checks if not c.ok).problems[0][1]


def test_a_stale_ping_after_a_fresh_one_is_caught():
    publishes = [publish(2, 0), publish(3, 5)]
    messages = full_delivery(2, 1) + full_delivery(3, 6) + [ping("plain", "PUSH_RC", 2, 15)]
    failed, _ = failures(messages, [answer(2, 0.5), answer(3, 5.5)], publishes)
    assert ("stale", "plain") in failed and ("newest", "plain") in failed
    # The same ping in flight when a replica was killed is the documented exception.
    assert ("stale", "plain") not in failures(messages, [answer(2, 0.5), answer(3, 5.5)], publishes, [fault("kill", 14.5)])[0]
    # Two requests in flight at once may reach FCM in either order: an older ping recorded moments after the newer one
    # is not stale; seconds after, it is.
    racing = full_delivery(2, 1) + full_delivery(3, 6) + [ping("plain", "PUSH_RC", 2, 6.3)]
    assert ("stale", "plain") not in failures(racing, [answer(2, 0.5), answer(3, 5.5)], publishes)[0]


def test_a_second_send_of_a_ping_accepted_while_the_database_was_stopped_is_excused_and_no_other():
    publishes = [publish(2, 0)]
    messages = full_delivery(2, 1) + [ping("plain", "PUSH_RC", 2, 9)]
    answers = [answer(2, 0.5)]
    # Accepted at 1 s, half a second before PostgreSQL stopped: its progress could not be written; sent again at 9 s.
    assert ("duplicates", "plain") not in failures(messages, answers, publishes, [fault("pg_pause", 1.5, 6)])[0]
    # Accepted 3 s before the database stopped: its progress was written, so a second send is a violation.
    assert ("duplicates", "plain") in failures(messages, answers, publishes, [fault("pg_pause", 4, 6)])[0]


def test_a_triple_send_is_caught_even_with_a_fault_in_flight():
    publishes = [publish(2, 0)]
    messages = full_delivery(2, 1) + [ping("plain", "PUSH_RC", 2, 4), ping("plain", "PUSH_RC", 2, 8)]
    failed, _ = failures(messages, [answer(2, 0.5)], publishes, [fault("kill", 1.5, 3)])
    assert ("duplicates", "plain") in failed


def test_a_duplicate_with_no_process_fault_in_flight_is_caught():
    publishes = [publish(2, 0)]
    messages = full_delivery(2, 1) + [ping("plain", "PUSH_RC", 2, 9)]
    answers = [answer(2, 0.5)]
    assert ("duplicates", "plain") in failures(messages, answers, publishes)[0]
    # A database fault is no excuse for a ping whose progress was written before it (docs/replicas.md) ...
    assert ("duplicates", "plain") in failures(messages, answers, publishes, [fault("pg_restart", 4, 6)])[0]
    # ... nor a replica paused long before the first ping went out ...
    assert ("duplicates", "plain") in failures(messages, answers, publishes, [fault("pause", -10, -5)])[0]
    # ... but a kill -9 while the first was in flight is.
    assert ("duplicates", "plain") not in failures(messages, answers, publishes, [fault("kill", 1.5, 4)])[0]


def test_a_missing_wave_shard_is_caught():
    publishes = [publish(2, 0)]
    messages = [m for m in full_delivery(2, 1) if m["message"].get("topic") != "RC_WAVE_2"]
    failed, _ = failures(messages, [answer(2, 0.5)], publishes)
    assert ("waves", "waved") in failed and ("lost", "waved") in failed


def test_a_shard_pinged_twice_with_the_newest_version_fails_the_waves():
    publishes = [publish(2, 0)]
    messages = full_delivery(2, 1) + [ping("waved", "RC_WAVE_1", 2, 10)]
    failed, _ = failures(messages, [answer(2, 0.5)], publishes)
    assert ("waves", "waved") in failed and ("duplicates", "waved") in failed


def test_an_unacknowledged_webhook_and_a_noisy_end_fail_the_settled_check():
    publishes = [publish(2, 0)]
    messages = full_delivery(2, 1)
    failed, _ = failures(messages, [answer(2, 0.5, status=503)], publishes)
    assert ("settled", "webhooks") in failed
    checks = check(messages, [answer(2, 0.5)], publishes, [], ROUTES, {"quiet": False, "why": "3 pending events"})
    assert [c.scope for c in checks if not c.ok] == ["the end was quiet"]


def test_a_violation_prints_the_seed_and_the_events_around_it():
    publishes = [publish(2, 0), publish(3, 5)]
    messages = full_delivery(2, 1) + full_delivery(3, 6) + [ping("plain", "PUSH_RC", 2, 15)]
    answers = [answer(2, 0.5), answer(3, 5.5)]
    faults = [fault("pg_pause", 12, 14)]
    checks = check(messages, answers, publishes, faults, ROUTES, {"quiet": True})
    ok, text = printed(checks, {"seed": 4242, "faults": faults, "publishes": publishes, "answers": answers, "messages": messages})
    assert not ok
    assert "VIOLATION [stale] seed 4242" in text and "--seed 4242" in text
    assert "fault    pg_pause" in text and "ping     v2 plain -> PUSH_RC" in text and "publish  v3" in text
    assert text.rstrip().splitlines()[-1].endswith("failed") and " 0 failed" not in text.rstrip().splitlines()[-1]


def test_a_campaign_thread_that_dies_fails_the_run():
    """Issue #49: a publisher, scheduler or sender thread that raises is recorded, and the run's `campaign` check
    fails with it, instead of the thread dying quietly and its projects going unchecked."""
    import threading

    errors, lock = [], threading.Lock()

    def publisher(until):
        raise RuntimeError(f"the emulator answered garbage at {until}")

    worker = threading.Thread(target=campaign.guarded, args=(errors, lock, "publisher", publisher, 42))
    worker.start()
    worker.join()
    assert len(errors) == 1 and "the publisher thread died: RuntimeError('the emulator answered garbage at 42')" in errors[0]
    checks = check([], [], [], [], ROUTES, {"quiet": True, "errors": errors})
    failed = [c for c in checks if not c.ok]
    assert [c.invariant for c in failed] == ["campaign"], failed
