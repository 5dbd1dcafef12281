"""A throwaway PostgreSQL server for a test or a benchmark: `initdb` in a temporary directory, `pg_ctl` on a free
loopback port. Debian's `postgresql` package provides the programs (not on PATH); they refuse to run as root, so as root
they run as the `postgres` user, in a directory outside pytest's (which that user may not enter)."""
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class Missing(Exception):
    """PostgreSQL is not installed."""


def postgres_bin():
    root = Path("/usr/lib/postgresql")
    for version in sorted((p for p in root.glob("*") if p.name.isdigit()), key=lambda p: -int(p.name)):
        if (version / "bin" / "initdb").exists():
            return version / "bin"
    raise Missing("PostgreSQL is not installed (apt-get install postgresql)")


def free_port():
    """A loopback port nothing listens on now, below the kernel's range for outgoing connections
    (`ip_local_port_range`). The kernel's own pick for port 0 lies inside that range, where any outgoing connection can
    take it before a server binds it, or while a server that keeps its port is down (a killed replica, a restarted
    PostgreSQL). CI met it on 2026-12-05: `could not bind IPv4 address "127.0.0.1": Address already in use`."""
    try:
        ceiling = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ceiling = 32768
    ceiling = min(ceiling, 65536)
    floor = max(1024, ceiling - 12000)
    for _ in range(200):
        port = random.randrange(floor, ceiling)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {floor}..{ceiling - 1}")


class Cluster:
    """A PostgreSQL server of its own, with an empty database `rc_relay`. `durable=False` turns fsync off (tests);
    the benchmark keeps PostgreSQL's defaults. `options`: more server settings (`-c name=value …`)."""

    def __init__(self, durable=False, options=""):
        self.bin = postgres_bin()
        self.durable = durable
        self.options = options  # more server settings, as `-c name=value` (shared_preload_libraries, say)
        self.dir = Path(tempfile.mkdtemp(prefix="rc-relay-pg-"))
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
        self.run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", *([] if durable else ["--no-sync"]))
        self.start()
        self.run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "rc_relay")
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/rc_relay?sslmode=disable"

    @property
    def data(self):
        return str(self.dir / "data")

    def run(self, program, *args):
        command = [str(self.bin / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, check=True, capture_output=True, text=True, cwd="/tmp",
                              stdin=subprocess.DEVNULL).stdout

    def start(self):
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1" + ("" if self.durable else " -c fsync=off")
        options += f" {self.options}" if self.options else ""
        self.run("pg_ctl", "-D", self.data, "-w", "-t", "300", "-l", str(self.dir / "log"), "-o", options, "start")

    def stop(self):
        self.run("pg_ctl", "-D", self.data, "-w", "-t", "300", "-m", "immediate", "stop")

    def destroy(self):
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass  # stopped already
        shutil.rmtree(self.dir, ignore_errors=True)

    def sql(self, statement):
        return self.run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", "rc_relay", "-At",
                        "-c", statement).strip()

    def wait_for(self, statement, expected, timeout=60):
        """Waits until the query answers `expected` (the database's state is the event waited for)."""
        deadline = time.time() + timeout
        answer = None
        while time.time() < deadline:
            answer = self.sql(statement)
            if answer == expected:
                return
            time.sleep(0.1)
        raise AssertionError(f"{statement!r} answered {answer!r}, not {expected!r}")

    def processes(self):
        """The server's processes now (the postmaster and its backends): each one's /proc entry and its stat fields."""
        postmaster = int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry.name) == postmaster or int(fields[1]) == postmaster:
                found.append((entry, fields))
        return found

    def cpu_seconds(self):
        """CPU the server's processes used so far (the postmaster and its backends)."""
        return sum(int(fields[11]) + int(fields[12]) for _, fields in self.processes()) / os.sysconf("SC_CLK_TCK")
