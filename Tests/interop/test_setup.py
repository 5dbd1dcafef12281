"""The set-up a fresh machine needs is one list (scripts/debian-packages) that scripts/test, .ci/run and the README
agree on, and no test skips by itself or behaves otherwise in CI."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listed():
    lines = (ROOT / "scripts/debian-packages").read_text().splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


def test_test_servers_listen_below_the_ports_of_outgoing_connections():
    # CI, 2026-12-05: a test cluster's port, the kernel's pick for port 0 (from the range outgoing connections use),
    # was taken by another connection before PostgreSQL bound it. Every pick lies below that range, and is free.
    import socket
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from postgres import free_port
    floor = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(50):
        port = free_port()
        assert 1024 <= port < floor
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_the_readme_names_the_packages_of_the_one_list():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("- **To run `scripts/test`**")[1].split("- **To measure**")[0]
    command = re.search(r"apt-get install ([^`]+?)\n  ```", section, re.S).group(1)
    assert command.replace("\\", " ").split() == listed()


def test_ci_and_scripts_test_read_the_list_and_name_no_package_of_their_own():
    for script in [".ci/run", "scripts/test"]:
        text = (ROOT / script).read_text()
        assert "scripts/debian-packages" in text, script
        assert not re.search(r"apt-get install[^\n]*\b(nginx|postgresql|chromium)\b", text), script


def test_no_test_skips_by_itself_or_looks_at_ci():
    for path in sorted((ROOT / "Tests/interop").rglob("*.py")):
        text = path.read_text()
        # The one skip is conftest.require's, for a package the user left out. Skip and expected-failure marks and
        # imports that skip count too. (Each word is spelt with a character class, so this file does not match itself.)
        skips = len(re.findall(r"pytest\.skip\(|\bskip[i]f\b|\bimportor[s]kip\b|\bx[f]ail\b|\bmark\.skip\b", text))
        assert skips == (1 if path.name == "conftest.py" else 0), f"{path.name} skips by itself"
        assert not re.search(r"environ(\.get)?\(?\[?[\"']CI[\"']", text), f"{path.name} behaves otherwise in CI"


def test_scripts_test_refuses_to_leave_out_what_every_test_needs():
    result = subprocess.run([str(ROOT / "scripts/test"), "--without", "libz-dev"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 64 and "libz-dev cannot be left out" in result.stderr
    result = subprocess.run([str(ROOT / "scripts/test"), "--bogus"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 64
    help = subprocess.run([str(ROOT / "scripts/test"), "--help"], capture_output=True, text=True, timeout=60)
    assert help.returncode == 0 and "--without nginx,caddy" in help.stdout


def test_every_package_a_test_imports_is_in_requirements_txt():
    """A fresh machine's virtual environment has only requirements.txt: a package installed here by hand and imported by
    a test fails in CI (stop 61's slack_sdk and google-apps-chat did)."""
    import ast
    import importlib.metadata
    import importlib.util
    import sys

    def canonical(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    lines = (ROOT / "Tests/interop/requirements.txt").read_text().splitlines()
    required = {canonical(re.split(r"[\[=<>~! ]", line.strip())[0]) for line in lines if line.strip()}
    local = {path.stem for path in (ROOT / "Tests/interop").glob("*.py")}
    owners = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or []:
            if file.suffix == ".py":
                owners[str(file.locate().resolve())] = canonical(dist.metadata["Name"])
    missing = set()
    for path in sorted((ROOT / "Tests/interop").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in local:
                    continue
                spec = importlib.util.find_spec(name)
                assert spec is not None and spec.origin, f"{path.name} imports {name}, which is not installed"
                owner = owners.get(str(Path(spec.origin).resolve()))
                if owner not in required:
                    missing.add(f"{path.name}: {name} ({owner})")
    assert not missing, f"imported but not in requirements.txt: {sorted(missing)}"
