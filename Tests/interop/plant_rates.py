"""How often a random-seed campaign catches each planted bug (docs/replicas.md, "Planted bugs").

    python Tests/interop/plant_rates.py --seeds 10 --minutes 1.2 [--parallel 2] [--plant progress ...]

Runs `campaign.py --plant P` with `--seeds` random seeds per bug (and as many without a bug, the control), at most
`--parallel` at once, and prints per bug how many runs failed, with which invariants, and each run's seed, so a run
can be replayed. A bug is caught when its run fails a check of the relay's (not `campaign`: that is the campaign's own
trouble, and counts as not caught). Each run's directory is kept under --dir. The campaign's code and both binaries
are copied there first, so a build or an edit while the runs go on changes none of them.
"""
import argparse
import collections
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from campaign import BINARY, PLANTED_BINARY, PLANTS  # noqa: E402

HERE = Path(__file__).resolve().parent


def snapshot(directory):
    """The campaign's code and both binaries, copied: (campaign.py's copy, the environment naming the binaries)."""
    code = directory / "code"
    shutil.copytree(HERE, code, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    binaries = directory / "bin"
    binaries.mkdir(exist_ok=True)
    for binary in (BINARY, PLANTED_BINARY):
        shutil.copy2(binary, binaries / Path(binary).name)
    env = {**os.environ, "RC_RELAY_BIN": str(binaries / Path(BINARY).name),
           "RC_RELAY_PLANTED_BIN": str(binaries / Path(PLANTED_BINARY).name)}
    return code / "campaign.py", env


def run_one(plant, seed, minutes, directory, script, env):
    """One campaign: (plant, seed, failed invariants, the campaign's own errors, its report)."""
    command = [sys.executable, str(script), "--seed", str(seed), "--minutes", str(minutes),
               "--dir", str(directory / f"{plant or 'none'}-{seed}")]
    if plant:
        command += ["--plant", plant]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=env)
    failed = collections.Counter(re.findall(r"^VIOLATION \[(\w+)\]", done.stdout, re.M))
    own = failed.pop("campaign", 0)
    return plant, seed, failed, own, done.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--minutes", type=float, default=1.2)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--plant", action="append", help=f"one of {', '.join(PLANTS)}, or none (default: each, and none)")
    parser.add_argument("--dir", help="where each run's files go (default: a new temporary directory)")
    args = parser.parse_args(argv)
    directory = Path(args.dir or tempfile.mkdtemp(prefix="rc-relay-plant-rates-"))
    directory.mkdir(parents=True, exist_ok=True)
    script, env = snapshot(directory)
    plants = [None if plant == "none" else plant for plant in args.plant] if args.plant else [None, *PLANTS]
    draw = random.SystemRandom()
    jobs = [(plant, draw.randrange(1, 1_000_000)) for plant in plants for _ in range(args.seeds)]
    results = collections.defaultdict(list)
    with ThreadPoolExecutor(args.parallel) as pool:
        for plant, seed, failed, own, _ in pool.map(lambda job: run_one(*job, args.minutes, directory, script, env), jobs):
            results[plant].append((seed, failed, own))
            verdict = ", ".join(f"{k} {n}" for k, n in sorted(failed.items())) or "passed"
            print(f"{plant or 'none':12} seed {seed:6}: {verdict}{f' (campaign trouble {own})' if own else ''}", flush=True)
    print(f"\n{'bug':12} caught  invariants (runs failing each)")
    for plant in plants:
        runs = results[plant]
        caught = sum(1 for _, failed, _ in runs if failed)
        invariants = collections.Counter(k for _, failed, _ in runs for k in failed)
        print(f"{plant or 'none':12} {caught:2}/{len(runs):<3}  " + ", ".join(f"{k} {n}" for k, n in sorted(invariants.items())))
    print(f"files: {directory}")


if __name__ == "__main__":
    sys.exit(main())
