"""The store's part of the benchmark (scripts/bench.py --store): what PostgreSQL writes per webhook, and two replicas
on one database under Eventarc's redelivery mix (issue #50).

- `wal(cluster)`: PostgreSQL's own WAL counters (pg_stat_wal: records, full-page images, bytes) and its checkpoints
  so far (pg_stat_bgwriter), read before and after each load; `per_webhook` turns two readings into figures.
- `two_replicas(...)`: two rc-relay replicas started together on the cluster (both race for the projects' leases), and
  one load spread over both: two wrk processes, one per replica, each with half of the webhooks, and every fifth
  webhook in both halves (the same `webhook-id`, body and signature: a redelivery to the other replica). It is judged
  by the store itself: every event the outbox admitted during the load was either accepted by FCM or stood down for a
  newer version FCM had accepted (`superseded`), once each (no duplicate, none lost), no 5xx or socket error, and no
  `deadlock detected` in PostgreSQL's log.
"""
import pathlib
import re
import subprocess
import tempfile
import time


def wal(cluster):
    """PostgreSQL's WAL counters and checkpoint count now (since the cluster started)."""
    records, fpi, size = cluster.sql("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").split("|")
    checkpoints = cluster.sql("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter")
    return {"records": int(records), "fpi": int(fpi), "bytes": int(float(size)), "checkpoints": int(checkpoints)}


def per_webhook(before, after, webhooks):
    """WAL bytes, records and full-page images per webhook between two readings, and the checkpoints begun between."""
    count = max(webhooks, 1)
    return {"wal_bytes": (after["bytes"] - before["bytes"]) / count, "wal_records": (after["records"] - before["records"]) / count,
            "wal_fpi": (after["fpi"] - before["fpi"]) / count, "checkpoints": after["checkpoints"] - before["checkpoints"]}


def deadlocks(cluster):
    """How many `deadlock detected` errors PostgreSQL has logged."""
    return (cluster.dir / "log").read_text(errors="replace").count("deadlock detected")


def split_requests(lines, first_half, second_half):
    """Writes the request lines in two halves, every other one to each, and every fifth to both: a redelivery."""
    with open(first_half, "w") as a, open(second_half, "w") as b:
        for n, line in enumerate(lines):
            if n % 5 == 0:
                a.write(line)
                b.write(line)
            elif n % 2 == 0:
                a.write(line)
            else:
                b.write(line)


def two_wrks(scripts, urls, connections, duration, threads, parse):
    """Two wrk processes at once, one per replica, each with half the connections. Their output goes to files, not
    pipes: a pipe read only after the other wrk ended filled up, and its wrk stopped sending until then (found
    2026-12-05: the replica that held no lease sat idle for the rest of the load, and its p99 was 8 to 12 s)."""
    # wrk's default timeout (2 s) would count a slow answer as a socket error, not as a latency.
    with tempfile.TemporaryDirectory() as folder:
        outputs = [(pathlib.Path(folder) / f"wrk-{i}.out", pathlib.Path(folder) / f"wrk-{i}.err") for i in range(len(scripts))]
        procs = []
        for script, url, (output, errors) in zip(scripts, urls, outputs):
            with output.open("w") as out, errors.open("w") as err:
                procs.append(subprocess.Popen(
                    ["wrk", "-t", str(threads), "-c", str(connections // 2), "-d", f"{duration}s", "--latency", "--timeout",
                     "30s", "-s", str(script), url], stdout=out, stderr=err, text=True))
        results = []
        for proc, (output, errors) in zip(procs, outputs):
            proc.wait()
            if proc.returncode != 0:
                raise SystemExit(f"wrk failed: {output.read_text()}{errors.read_text()[-2000:]}")
            results.append(parse(output.read_text()))
    return results


def two_replicas_load(bench, cluster, replicas, urls, emulator_url, label):
    """One two-replica load (see the module's docstring). `bench` gives the load's shape and helpers: connections,
    duration, projects, the next first version, write_requests, LUA, parse_wrk, accepted, superseded, work. Returns the
    figures of the run, or raises SystemExit when it is void (a duplicate, a loss, a 5xx, a deadlock)."""
    work, count = bench.work, 25000 * bench.duration
    first = bench.next_version
    everything = work / "requests-two.tsv"
    bench.write_requests(everything, count, first, projects=bench.projects)
    lines = everything.read_text().splitlines(keepends=True)
    halves = [work / "requests-two-a.tsv", work / "requests-two-b.tsv"]
    split_requests(lines, *halves)
    scripts = []
    for index, half in enumerate(halves):
        script = work / f"relay-two-{index}.lua"
        script.write_text(bench.LUA % (half, "/webhooks/remote-config", 2, 2))
        scripts.append(script)
    began = cluster.sql("SELECT extract(epoch FROM clock_timestamp())")
    accepted_before = bench.accepted(emulator_url)
    superseded_before = sum(bench.superseded(url) for url in urls)
    wal_before, deadlocks_before = wal(cluster), deadlocks(cluster)
    cpu_before = [r.cpu_seconds() for r in replicas]
    db_before = cluster.cpu_seconds()
    results = two_wrks(scripts, urls, bench.connections, bench.duration, 2, bench.parse_wrk)
    # Everything admitted is delivered, by whichever replica holds its project's lease.
    deadline = time.time() + 120
    while cluster.sql("SELECT count(*) FROM rc_relay_outbox WHERE NOT settled") != "0":
        if time.time() > deadline:
            raise SystemExit(f"void run ({label}): events still pending two minutes after the load; see {work}")
        time.sleep(0.2)
    admitted = int(cluster.sql(f"SELECT count(*) FROM rc_relay_outbox WHERE received_at >= to_timestamp({began})"))
    time.sleep(0.5)
    sent = bench.accepted(emulator_url) - accepted_before
    stood_down = int(sum(bench.superseded(url) for url in urls) - superseded_before)
    wal_after, found_deadlocks = wal(cluster), deadlocks(cluster) - deadlocks_before
    requests = sum(r["requests"] for r in results)
    ok = sum(r["ok"] for r in results)
    figures = {
        "label": label, "admitted": admitted, "sent": sent, "superseded": stood_down,
        "duplicates": max(0, sent + stood_down - admitted), "lost": max(0, admitted - sent - stood_down),
        "non2xx": sum(r["non2xx"] for r in results), "socket_errors": sum(r["socket_errors"] for r in results),
        "deadlocks": found_deadlocks, "requests": requests, "ok": ok,
        # Distinct webhooks a second: what the two replicas admitted between them, over the load's length.
        "rps": admitted / bench.duration, "requests_per_s": sum(r["rps"] for r in results),
        "p50_ms": max(r["p50_ms"] for r in results), "p99_ms": max(r["p99_ms"] for r in results),
        "cpu_ms": sum(r.cpu_seconds() - c for r, c in zip(replicas, cpu_before)) / max(admitted, 1) * 1000,
        "db_cpu_ms": (cluster.cpu_seconds() - db_before) / max(admitted, 1) * 1000,
        **per_webhook(wal_before, wal_after, admitted),
    }
    # The next load follows the newest version admitted, not the last one written to the file: wrk sends a fraction of
    # the file, and a load starting `count` past this one's (250,000 in 10 s) sent every version of it more than
    # 100,000 past the marks: each an outlier, with its warning and its Remote Config check (found 2026-12-05; so were
    # the measured two-replica runs before it, as the code stood since the mode was added).
    newest = int(cluster.sql("SELECT coalesce(max(version), 0) FROM rc_relay_outbox"))
    bench.next_version = max(newest, first) + 2 * bench.connections
    if figures["duplicates"] or figures["lost"] or figures["non2xx"] or figures["socket_errors"] or found_deadlocks:
        raise SystemExit(f"void run ({label}): {figures}; see {work}")
    return figures


def start_two_replicas(start_relay, binary, work, emulator_url, key, cluster, projects, ca, extra=""):
    """Two store replicas started together, so both race for the projects' leases (the first to renew may take them
    all: nothing shares them out yet); returns them, and how many leases each took, once every lease is held."""
    started = [start_relay(binary, work, emulator_url, key, name=f"store-two-{n}", ca=ca, projects=projects,
                           extra=f'store: {{postgres: {{url: "{cluster.url}"}}}}\n{extra}') for n in range(2)]
    deadline = time.time() + 60
    while True:
        held = [(work / f"store-two-{n}.log").read_text().count("project lease taken") for n in range(2)]
        if sum(held) >= projects:
            break
        if time.time() > deadline:
            raise SystemExit(f"the two replicas held {held} of {projects} leases after a minute; see {work}")
        time.sleep(0.05)
    return [(proc, url) for proc, url, _ in started], held


def leases_line(held):
    return " + ".join(str(n) for n in held)


def deadlock_lines(cluster):
    """PostgreSQL's `deadlock detected` lines with their detail, for a void run's report."""
    text = (cluster.dir / "log").read_text(errors="replace")
    return [line for line in text.splitlines() if re.search(r"deadlock detected|Process \d+ waits", line)]
