#!/usr/bin/env python3
"""Where a webhook's CPU goes: the relay under the benchmark's load, sampled by perf, each sample charged to a layer.

Starts the emulator and a release build of the relay as scripts/bench does, warms up, then records the relay with
`perf record -e cpu-clock -g` (hardware counters are not needed) while wrk replays signed webhooks. Each sample is
charged to the innermost frame of its call stack that belongs to one of these layers, so the runtime, malloc and
NIO work a layer calls is its own:

- rc-relay: our targets (RelayServer, RelayCore, DeliveryEngine, FCMClient, RelayStore), with the JSON decoding,
  logging, metrics and HMAC they call;
- PostgresNIO: with --store, the driver of the shared store, with the NIO writes it makes;
- AsyncHTTPClient: the outbound client to FCM, with the NIO writes it makes;
- Hummingbird: the inbound server (HummingbirdCore, Hummingbird, NIOHTTPTypes), with its NIOAsyncChannel;
- NIO event loops: what none of those called: the selector, socket reads, the HTTP/1 codecs for both connections;
- Swift concurrency: task scheduling on the global executor's threads that no layer called.

Prints a table (share of samples, and milliseconds per webhook from the relay's CPU in /proc) and a JSON line.

Usage: scripts/profile [--bin PATH] [--duration 10] [--connections 32] [--projects 32] [--store | --fair-floor]

--store: the relay runs on a throwaway PostgreSQL cluster (store.postgres), as scripts/bench --store runs it.
"""
import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (same folder: the benchmark's processes and load)

LAYERS = [
    ("rc-relay", re.compile(r"\$s(11RelayServer|9RelayCore|14DeliveryEngine|9FCMClient|10RelayStore)")),
    ("fair floor", re.compile(r"\$s(9Yardstick|10fair_floor)")),
    ("PostgresNIO", re.compile(r"11PostgresNIO")),
    ("AsyncHTTPClient", re.compile(r"15AsyncHTTPClient")),
    ("Hummingbird", re.compile(r"(11Hummingbird|15HummingbirdCore|12NIOHTTPTypes|17NIOHTTPTypesHTTP1)")),
]
KERNEL = re.compile(r"^(entry_SYSCALL|do_syscall_64|asm_|irqentry|ret_from_fork)")


def attribute(script_output):
    """Counts samples per layer, and how many of each were in the kernel."""
    layers, kernel, total = collections.Counter(), collections.Counter(), 0
    for sample in script_output.strip().split("\n\n"):
        lines = [line.strip() for line in sample.strip().splitlines()]
        if len(lines) < 2:
            continue
        total += 1
        thread = lines[0]
        frames = [line.split(None, 1)[1] if " " in line else line for line in lines[1:]]
        layer = next((name for frame in frames for name, pattern in LAYERS if pattern.search(frame)), None)
        if layer is None:
            layer = "NIO event loops" if "NIO-" in thread else "Swift concurrency"
        layers[layer] += 1
        if any(KERNEL.match(frame) for frame in frames):
            kernel[layer] += 1
    return layers, kernel, total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", help="the rc-relay binary (default: the checkout's release build, brought up to date first)")
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--projects", type=int, default=32, help="spread the webhooks over this many projects, as scripts/bench does")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--store", action="store_true", help="the relay on a throwaway PostgreSQL cluster")
    target.add_argument("--fair-floor", action="store_true", help="profile the fair floor instead, under the same load")
    args = parser.parse_args()
    args.bin = args.bin or bench.release_binary()
    work = Path(tempfile.mkdtemp(prefix="rc-relay-profile-"))
    cluster = None
    emulator, emulator_url, key = bench.start_emulator(args.bin, work, projects=args.projects)
    if args.store:
        sys.path.insert(0, str(bench.ROOT / "Tests" / "interop"))
        from postgres import Cluster

        cluster = Cluster(durable=True)
        relay, url, started = bench.start_relay(args.bin, work, emulator_url, key, name="store", projects=args.projects,
                                                extra=f'store: {{postgres: {{url: "{cluster.url}"}}}}\n')
        relay.wait_for_line(work / "store.log", "project lease taken", count=args.projects)
    elif args.fair_floor:
        token = bench.access_token(emulator_url)
        started = time.monotonic()
        relay, url = bench.start_yardstick("fair-floor", work, emulator_url, token)
    else:
        relay, url, started = bench.start_relay(args.bin, work, emulator_url, key, projects=args.projects)
    script, requests = work / "relay.lua", work / "requests.tsv"
    perf_data = work / "perf.data"
    try:
        bench.first_accepted(url, started)
        version = 1000
        for seconds, record in ((5, False), (args.duration, True)):  # a warm-up, then the recorded run
            bench.write_requests(requests, 12000 * seconds, version, projects=args.projects)
            version += 12000 * seconds
            script.write_text(bench.LUA % (requests, "/webhooks/remote-config", 2, 2))
            cpu_before = relay.cpu_seconds()
            perf = None
            if record:
                perf = subprocess.Popen(
                    ["perf", "record", "-q", "-e", "cpu-clock", "-g", "-o", str(perf_data), "-p", str(relay.proc.pid),
                     "--", "sleep", str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            result = bench.wrk(script, url, args.connections, seconds)
            cpu_ms = (relay.cpu_seconds() - cpu_before) / max(result["ok"], 1) * 1000
            if perf:
                perf.wait()
            if result["non2xx"] or result["socket_errors"]:
                raise SystemExit(f"void run: {result}")
    finally:
        relay.stop()
        emulator.stop()
        if cluster:
            cluster.destroy()
    output = subprocess.run(["perf", "script", "-i", str(perf_data), "-F", "comm,ip,sym"],
                            capture_output=True, text=True, check=True).stdout
    layers, kernel, total = attribute(output)
    target_name = "fair floor" if args.fair_floor else "rc-relay"
    print(f"\n{target_name} profile: {result['rps']:.0f} webhooks/s, {cpu_ms:.3f} ms CPU per webhook, {total} samples "
          f"(perf data: {perf_data})\n")
    print("| layer | share | ms per webhook | of which in the kernel |\n|---|---|---|---|")
    figures = {}
    for name, count in layers.most_common():
        share = count / total
        figures[name] = {"share": share, "ms_per_webhook": share * cpu_ms, "kernel_share": kernel[name] / total}
        print(f"| {name} | {share:.1%} | {share * cpu_ms:.3f} | {kernel[name] / total:.1%} |")
    print("\n" + json.dumps({"profile": target_name, "webhooks_per_s": result["rps"], "cpu_ms_per_webhook": cpu_ms,
                             "samples": total, "layers": figures}))


if __name__ == "__main__":
    sys.exit(main())
