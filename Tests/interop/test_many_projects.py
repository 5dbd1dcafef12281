"""Issue #52: many projects on one shared store, idle at almost no cost. An idle replica's renewal round (every
`leaseSeconds / 4`) makes the same statements for 10 projects or 300: one renews the replica's heartbeat, which every
lease it holds counts on (no lease row is written: their row versions stay as they were), one finds which held
projects have an event pending (none here, so none is swept), one applies a marks reset, and the sweeper's round
prunes. PostgreSQL itself counts them (pg_stat_statements, from Debian's postgresql package); the renewal statement's
own count says how many rounds passed, so nothing here waits for a fixed time."""
import re
import subprocess

import pytest

from conftest import require, start_relay, stop_relay, until

# The renewal statement (the heartbeat), as pg_stat_statements normalises it.
RENEW = "UPDATE rc_relay_replicas"


def held(cluster):
    """The leases held now; none before the relay made its tables."""
    try:
        return int(cluster.sql("SELECT count(*) FROM rc_relay_held"))
    except subprocess.CalledProcessError:
        return 0


def statements(cluster):
    """Calls per statement since the last reset, the counting's own queries left out."""
    rows = cluster.sql("SELECT calls, replace(query, E'\\n', ' ') FROM pg_stat_statements "
                       "WHERE query NOT LIKE '%pg_stat_statements%' AND dbid = (SELECT oid FROM pg_database WHERE datname = 'rc_relay')")
    calls = {}
    for line in rows.splitlines():
        count, query = line.split("|", 1)
        calls[query] = calls.get(query, 0) + int(count)
    return calls


def idle_round_statements(emulator, tmp_path, count, rounds=6):
    """Statements per renewal round of one idle replica holding `count` projects."""
    from postgres import Cluster, Missing

    require("postgresql", program=False)
    try:
        cluster = Cluster(options="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all")
    except Missing as missing:
        pytest.fail(f"{missing}: the tests of the shared store need it (scripts/test installs it)")
    relay = None
    tmp_path.mkdir(exist_ok=True)
    try:
        cluster.sql("CREATE EXTENSION pg_stat_statements")
        projects = "projects:\n" + "".join(f"  - {{id: idle-{n:04d}}}\n" for n in range(count))
        extra = f"""
webhook: {{secrets: [{{env: TEST_WEBHOOK_SECRET}}]}}
store: {{postgres: {{url: "{cluster.url}", leaseSeconds: 3}}}}
{projects}"""
        relay = start_relay(emulator, tmp_path, extra)
        assert until(lambda: held(cluster) == count, 120), \
            "the replica never held every project's lease"
        # Every lease is held (none is swept: nothing is pending): from here on the replica is idle.
        assert until(lambda: sum(1 for line in relay["proc"].lines if "project lease taken" in line) >= count, 60)
        renewals = lambda: sum(calls for query, calls in statements(cluster).items() if RENEW in query)
        start = renewals()
        assert until(lambda: renewals() >= start + 2, 60), "the replica stopped renewing"
        versions = "SELECT string_agg(xmin::text, ',' ORDER BY name) FROM rc_relay_leases"
        before = cluster.sql(versions)
        cluster.sql("SELECT pg_stat_statements_reset()")
        assert until(lambda: renewals() >= rounds, 60), "the replica stopped renewing"
        calls = statements(cluster)
        # The leases stayed held and no round wrote a lease's row.
        assert held(cluster) == count
        assert cluster.sql(versions) == before, "an idle round rewrote the leases' rows"
        done = sum(c for q, c in calls.items() if RENEW in q)
        return sum(calls.values()) / done, calls
    finally:
        if relay:
            stop_relay(relay)
        cluster.destroy()


def test_an_idle_renewal_round_makes_as_many_statements_for_300_projects_as_for_10(emulator, tmp_path):
    few, few_calls = idle_round_statements(emulator, tmp_path / "few", 10)
    many, many_calls = idle_round_statements(emulator, tmp_path / "many", 300)
    print(f"statements per idle round: {few:.1f} with 10 projects, {many:.1f} with 300")
    described = "\n".join(f"{c:6d}  {q[:150]}" for q, c in sorted(many_calls.items(), key=lambda item: -item[1]))
    # Per round: the renewal, the pending check, the resets' check, and the sweeper's prune (a transaction: its lock,
    # two deletes, BEGIN and COMMIT); a round that began before the reset or ends after the count may add one part.
    assert many <= 10, f"{many:.1f} statements per idle round with 300 projects:\n{described}"
    assert abs(many - few) <= 1.5, f"{few:.1f} statements per idle round with 10 projects, {many:.1f} with 300:\n{described}"
    # No statement of a round was a project's own sweep.
    assert not any(re.search(r"WITH page AS", q) for q in many_calls), described
