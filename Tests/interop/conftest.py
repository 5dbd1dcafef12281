"""Fixtures that run the real rc-relay binary and its FCM emulator as separate processes on loopback."""
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
from standardwebhooks.webhooks import Webhook

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("RC_RELAY_BIN", str(ROOT / ".build" / "debug" / "rc-relay"))
SECRET = "whsec_" + __import__("base64").b64encode(os.urandom(32)).decode()


# Told of every line any child process prints: a test that waits for something several processes may print waits on it.
LINES = threading.Condition()


class Process:
    """A child process whose stdout is read line by line in the background."""

    def __init__(self, args, env=None):
        self.lines = []
        self._queue = queue.Queue()
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})}
        )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            with LINES:
                self.lines.append(line)
                LINES.notify_all()
            self._queue.put(line)

    def wait_for(self, predicate, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            if predicate(line):
                return line
        raise AssertionError("process output did not show the expected line:\n" + "".join(self.lines))

    @property
    def output(self):
        """Everything printed so far; once the process has ended, everything it printed (the reader finishes first:
        without that wait, the last lines could still be in the pipe when a test reads)."""
        if self.proc.poll() is not None:
            self._pump_thread.join(timeout=30)
        return "".join(self.lines)

    def saw(self, text, timeout=30):
        """Whether `text` was printed, now or within `timeout` seconds: for a line written while the answer that
        caused it is on its way (the answer can reach the test before the reader thread reads the line)."""
        return until(lambda: text in "".join(self.lines), timeout)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# Packages whose tests the user asked to leave out (`scripts/test --without nginx,caddy`, or this variable): their
# tests skip, saying so, and scripts/test lists them at the end. Anything else that is missing fails.
LEFT_OUT = {name.strip() for name in os.environ.get("RC_RELAY_TEST_WITHOUT", "").split(",") if name.strip()}


def left_out(package):
    return package in LEFT_OUT or (package == "chromium-driver" and "chromium" in LEFT_OUT)


def require(package, program=None, extra_paths=("/usr/sbin", "/sbin")):
    """The path of `program` (default: the package's name) from Debian's `package`: a failure that names the package
    when it is missing, or a skip when the user left the package's tests out. `program=False`: the package is needed
    but has no program to find here (postgresql: postgres.py finds it)."""
    if left_out(package):
        pytest.skip(f"left out by request: needs {package} (scripts/test --without {package})")
    if program is False:
        return None
    name = program or package
    path = shutil.which(name) or next((f"{d}/{name}" for d in extra_paths if os.access(f"{d}/{name}", os.X_OK)), None)
    if not path:
        pytest.fail(f"{name} is not installed: apt-get install {package} (scripts/test installs it; "
                    f"scripts/test --without {package} leaves its tests out)")
    return path


SHOTS = ROOT / ".build" / "console-screenshots"


@pytest.fixture
def browser():
    """Headless Chromium (Debian's), driven by Selenium. A missing browser fails, naming the package;
    `scripts/test --without chromium` leaves these tests out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = require("chromium")
    driver_path = require("chromium-driver", "chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900", "--disable-gpu"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def shot(driver, name):
    """A screenshot of the page, to .build/console-screenshots/NAME.png (a test artifact)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def until(predicate, timeout):
    """Whether `predicate` came true within `timeout` seconds. For a state no process announces with a line of its own
    (a database row, the emulator's counters, a port that listens): it is read again whenever any child process prints
    a line, and at least every 0.2 s, never in place of the event itself."""
    deadline = time.monotonic() + timeout
    while not predicate():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        with LINES:
            LINES.wait(min(left, 0.2))
    return True


def start_emulator(tmp_path, *options):
    """Runs `rc-relay emulator` with its key file in `tmp_path`; `options` are more of its command-line options."""
    key_file = tmp_path / "key.json"
    proc = Process([BINARY, "emulator", "--port", "0", "--key-file", str(key_file), *options])
    line = proc.wait_for(lambda l: "fcm-emulator listening" in l)
    url = line.split("listening on ")[1].split(" ")[0]
    return {"url": url, "key_file": key_file, "key": json.loads(key_file.read_text()), "proc": proc}


@pytest.fixture
def emulator(tmp_path):
    emulator = start_emulator(tmp_path)
    yield emulator
    emulator["proc"].stop()


def start_relay(emulator, tmp_path, extra="", server="{port: 0}", fcm="", env=None):
    """Runs `rc-relay serve` with a config pointing at the emulator; `extra` adds top-level YAML, `server` replaces the
    server section (a YAML flow mapping), `fcm` adds to the fcm section (`, key: value`), `env` adds variables."""
    config = tmp_path / "rc-relay.yaml"
    config.write_text(
        f"""
server: {server}
fcm: {{credentialsFile: "{emulator['key_file']}", baseURL: "{emulator['url']}"{fcm}}}
log: {{format: json, level: debug}}
{extra}
"""
    )
    proc = Process([BINARY, "serve", "--config", str(config)], env={"TEST_WEBHOOK_SECRET": SECRET, **(env or {})})
    line = proc.wait_for(lambda l: "rc-relay listening" in l)
    address = json.loads(line)["address"]
    return {"url": f"http://{address}", "webhook": f"http://{address}/webhooks/remote-config", "proc": proc, "emulator": emulator}


def stop_relay(relay):
    proc = relay["proc"]
    proc.stop()
    # Whatever happened in the test, no secret, token or assertion reached the log.
    log = proc.output
    assert SECRET not in log and SECRET[6:] not in log
    assert "ya29." not in log, "an access token was logged"
    assert "eyJ" not in log, "a JWT was logged"


@pytest.fixture
def cluster():
    """A throwaway PostgreSQL cluster (postgres.py); missing PostgreSQL is a failure that names the package."""
    from postgres import Cluster, Missing

    require("postgresql", program=False)
    try:
        cluster = Cluster()
    except Missing as missing:
        pytest.fail(f"{missing}: the tests of the shared store need it (scripts/test installs it)")
    yield cluster
    cluster.destroy()


@pytest.fixture
def relay(emulator, tmp_path):
    relay = start_relay(emulator, tmp_path, "webhook: {secrets: [{env: TEST_WEBHOOK_SECRET}]}")
    yield relay
    stop_relay(relay)


def signed_headers(body: bytes, msg_id: str = None, secret: str = SECRET):
    """Headers a Standard Webhooks sender adds, made by the reference library."""
    from datetime import datetime, timezone

    msg_id = msg_id or "msg_" + os.urandom(8).hex()
    now = datetime.now(tz=timezone.utc)
    signature = Webhook(secret).sign(msg_id, now, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": signature}


def recorded(emulator):
    return requests.get(emulator["url"] + "/emulator/messages", timeout=10).json()
