"""`rc-relay simulate`: its printed peaks and its SVG chart against the fetch-load model worked out here independently
(docs/waves.md): shard k pinged at k * spread / shards, delivery uniform over D, client delay uniform over C."""
import re
import subprocess
import xml.etree.ElementTree as ET

from conftest import BINARY


def model_peak(devices, shards, spread, delay, delivery):
    """The peak of a sum of trapezoids, evaluated at every corner (the rate is piecewise linear)."""
    a, b = min(delivery, delay), max(delivery, delay)

    def density(x):
        if x < 0 or x > a + b:
            return 0.0
        if a == 0:
            return 1 / b
        if x < a:
            return x / (a * b)
        if x <= b:
            return 1 / b
        return (a + b - x) / (a * b)

    sends = [k * spread / shards for k in range(shards)]
    rate = lambda t: sum(devices / shards * density(t - s) for s in sends)
    return max(rate(s + c) for s in sends for c in (0, a, b, a + b))


def simulate(tmp_path, *args):
    out = tmp_path / "load.svg"
    run = subprocess.run([BINARY, "simulate", *args, "--out", str(out)], capture_output=True, text=True, timeout=60)
    return run, out


def peaks(stdout):
    found = {}
    for name, value in re.findall(r"^peak (as set|no waves|all at once): ([\d,.]+) fetches/s", stdout, re.M):
        found[name] = float(value.replace(",", ""))
    return found


def test_the_printed_peaks_match_the_model(tmp_path):
    args = dict(devices=2_000_000, shards=20, spread=600, delay=120, delivery=10)
    run, out = simulate(tmp_path, "--devices", "2000000", "--shards", "20", "--spread", "600", "--client-delay", "120")
    assert run.returncode == 0, run.stderr
    printed = peaks(run.stdout)
    assert abs(printed["as set"] - model_peak(**args)) < 0.1
    assert abs(printed["no waves"] - model_peak(2_000_000, 1, 0, 120, 10)) < 0.1
    assert abs(printed["all at once"] - 200_000) < 0.1
    # Odd settings where nothing tiles: the corners still find the peak.
    run, _ = simulate(tmp_path, "--devices", "123457", "--shards", "7", "--spread", "95", "--client-delay", "17", "--delivery", "23")
    assert abs(peaks(run.stdout)["as set"] - model_peak(123457, 7, 95, 17, 23)) < 0.1


def test_the_chart_is_an_svg_whose_lines_reach_their_peaks(tmp_path):
    run, out = simulate(tmp_path, "--devices", "1000000", "--shards", "4", "--spread", "400", "--client-delay", "30")
    assert run.returncode == 0, run.stderr
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert [line.get("data-series") for line in lines] == ["as set", "no waves", "all at once"]
    height, margin = float(root.get("height")), 70.0
    top = max(float(line.get("data-peak")) for line in lines)
    for line in lines:
        points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
        xs = [x for x, _ in points]
        assert xs == sorted(xs)
        highest = max((height - margin - y) / (height - 2 * margin) * top for _, y in points)
        assert abs(highest - float(line.get("data-peak"))) / top < 1e-3


def test_bad_settings_are_refused_with_a_reason_and_nothing_written(tmp_path):
    for args, word in [(["--shards", "0"], "shards"), (["--delivery", "0"], "delivery"), (["--devices", "-5"], "devices")]:
        run, out = simulate(tmp_path, *args)
        assert run.returncode != 0
        assert word in run.stderr
        assert not out.exists()
    run = subprocess.run([BINARY, "simulate", "--out", str(tmp_path / "missing" / "x.svg")], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "cannot write" in run.stderr


def test_docs_show_what_the_command_prints(tmp_path):
    from conftest import ROOT

    text = (ROOT / "docs" / "waves.md").read_text()
    command = re.search(r"```sh\nrc-relay simulate (.*)\n```", text).group(1).split()
    shown = re.search(r"```text\n(.*?)```", text, re.S).group(1).splitlines()
    run, _ = simulate(tmp_path, *command)
    printed = run.stdout.splitlines()
    assert printed[:-1] == shown[:-1]  # the last line names the chart file, which the test puts elsewhere
    assert shown[-1] == "chart: fetch-load.svg"
