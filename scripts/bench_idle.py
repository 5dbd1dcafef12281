"""Many projects, idle (issue #52): `scripts/bench --idle-only --projects 10000 [--store] [--idle-seconds 30]`.

One relay (and, with --store, one and then two replicas sharing the projects on a throwaway PostgreSQL) configured
with N projects, one route each and no polling, nothing arriving. For each it reports the time from the process start
to `/readyz` answering 200 and, on the store, to every project's lease held (by one replica or the other); then, after
5 s of settling, over `--idle-seconds`: each replica's CPU (the scheduler's own count, every thread) and wake-ups (its
threads' context switches) a second, its RSS, and PostgreSQL's CPU and wake-ups (the postmaster and its backends).
Last, after the watch, it times webhooks to projects picked at random (among those the emulator trusts), each sent to
the replica that holds its project: from the request to its `200` (FCM accepted the ping), the first event each
project has had since its lease was taken, against the same with one project.
"""
import json
import random
import statistics
import time
import urllib.request


def ready(url):
    try:
        with urllib.request.urlopen(url.split("/webhooks/")[0] + "/readyz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def postgres_switches(cluster):
    """Context switches of the cluster's processes so far (a process that ended takes its count with it)."""
    total = 0
    for entry, _ in cluster.processes():
        try:
            text = (entry / "status").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                total += int(line.split()[1])
    return total


def held(cluster, count):
    try:
        return int(cluster.sql("SELECT count(*) FROM rc_relay_held")) >= count
    except Exception:  # the tables are made by the first replica's migration
        return False


def first_pings(bench, urls, projects, trusted, count=9):
    """The median and the slowest time, in ms, from a webhook to its 200, for `count` projects picked at random among
    the first `trusted` (each a first event since its lease was taken)."""
    names = bench.bench_projects(projects)[:trusted]
    times = []
    for n, project in enumerate(random.Random(52).sample(names, min(count, len(names)))):
        url = urls(project)
        body = json.dumps({"versionNumber": str(100 + n), "updateType": "INCREMENTAL_UPDATE"}).encode()
        headers = bench.signed(body, f"msg_idle_{n}")
        headers.update({"ce-specversion": "1.0", "ce-type": "google.firebase.remoteconfig.remoteConfig.v1.updated",
                        "ce-source": f"//firebaseremoteconfig.googleapis.com/projects/{project}", "ce-id": f"idle-{n}"})
        started = time.monotonic()
        status, answer = bench.http("POST", url, body, headers)
        if status != 200:
            raise SystemExit(f"a webhook for {project} after idling was answered {status}: {answer[:300]!r}")
        times.append((time.monotonic() - started) * 1000)
    return {"median_ms": statistics.median(times), "max_ms": max(times), "count": len(times)}


def watch(replicas, cluster, seconds):
    """Each replica's CPU ms and wake-ups a second, its RSS, and PostgreSQL's CPU ms and wake-ups a second, over
    `seconds`."""
    before = [(r.cpu_ns(), r.context_switches()) for r in replicas]
    db_cpu, db_switches = (cluster.cpu_seconds(), postgres_switches(cluster)) if cluster else (0, 0)
    time.sleep(seconds)
    figures = []
    for replica, (ns, switches) in zip(replicas, before):
        spent = sum(now - ns.get(thread, 0) for thread, now in replica.cpu_ns().items())
        woken = sum(count - switches.get(thread, 0) for thread, count in replica.context_switches().items())
        figures.append({"cpu_percent": spent / 1e9 / seconds * 100, "wakeups_per_s": woken / seconds,
                        "rss_mb": replica.memory_kb("VmRSS") / 1024})
    database = None
    if cluster:
        database = {"cpu_percent": (cluster.cpu_seconds() - db_cpu) / seconds * 100,
                    "wakeups_per_s": (postgres_switches(cluster) - db_switches) / seconds}
    return figures, database


def idle_many(bench, binary, work, emulator_url, key, projects, seconds, cluster=None, replicas=1, trusted=1000):
    """One mode of the idle measurement: `replicas` relays with `projects` projects, in memory (no cluster) or on the
    cluster. Returns its figures."""
    name = f"idle-{projects}-{'store' if cluster else 'memory'}-{replicas}"
    extra = f'store: {{postgres: {{url: "{cluster.url}"}}}}\n' if cluster else ""
    started = [bench.start_relay(binary, work, emulator_url, key, name=f"{name}-{n}", projects=projects, extra=extra)
               for n in range(replicas)]
    began = min(s for _, _, s in started)
    try:
        urls = [url for _, url, _ in started]
        deadline = time.monotonic() + 600
        while not all(ready(url) for url in urls):
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: /readyz never answered 200; see {work}")
            time.sleep(0.01)
        to_ready = time.monotonic() - began
        to_leases = None
        if cluster:
            while not held(cluster, projects):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{name}: the leases were never all held; see {work}")
                time.sleep(0.05)
            to_leases = time.monotonic() - began
        time.sleep(5)  # what the start leaves (the first sweeps, the token's timer) settles
        figures, database = watch([proc for proc, _, _ in started], cluster, seconds)
        pids = {str(proc.proc.pid): url for proc, url, _ in started}

        def url_of(project):
            if not cluster or replicas == 1:
                return urls[0]
            holder = cluster.sql(f"SELECT holder FROM rc_relay_held WHERE name = 'project/{project}'") or ""
            return pids.get(holder.split("/")[-2] if holder.count("/") >= 2 else "", urls[0])

        pings = first_pings(bench, url_of, projects, trusted)
        return {"mode": name, "projects": projects, "replicas": replicas, "store": bool(cluster),
                "to_ready_s": to_ready, "to_every_lease_s": to_leases, "relays": figures, "postgres": database,
                "first_pings": pings}
    finally:
        for proc, _, _ in started:
            proc.stop()


def rows(results):
    """The table's rows: one per mode."""
    out = []
    for r in results:
        relays = "; ".join(f"{f['cpu_percent']:.2f} % CPU, {f['wakeups_per_s']:.1f} wake-ups/s, {f['rss_mb']:.1f} MB" for f in r["relays"])
        database = f"; PostgreSQL {r['postgres']['cpu_percent']:.2f} % CPU, {r['postgres']['wakeups_per_s']:.1f} wake-ups/s" if r["postgres"] else ""
        leases = f", every lease {r['to_every_lease_s']:.1f} s" if r["to_every_lease_s"] is not None else ""
        pings = r["first_pings"]
        database += f"; a first webhook after idling: {pings['median_ms']:.1f} ms median, {pings['max_ms']:.1f} ms at most ({pings['count']})"
        out.append((f"idle, {r['projects']} projects, {'store' if r['store'] else 'memory'}, {r['replicas']} replica(s)",
                    f"/readyz {r['to_ready_s']:.2f} s{leases}; {relays}{database}"))
    return out
