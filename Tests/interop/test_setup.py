"""The set-up a fresh machine needs is one list (scripts/debian-packages) that scripts/test, .ci/run and the README
agree on, and no test skips by itself or behaves otherwise in CI."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def listed():
    lines = (ROOT / "scripts/debian-packages").read_text().splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


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
