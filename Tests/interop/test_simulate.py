"""`rc-relay simulate`: its printed peaks and its SVG chart against the fetch-load model worked out here independently
(docs/waves.md): shard k pinged at k * spread / shards, delivery uniform over D, client delay uniform over C."""
import re
import subprocess
import xml.etree.ElementTree as ET

from conftest import BINARY, shot


def model_rate(devices, shards, spread, delay, delivery, t):
    """The rate at t: each shard's devices spread by delivery (uniform over D) plus client delay (uniform over C)."""
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

    return sum(devices / shards * density(t - k * spread / shards) for k in range(shards))


def model_peak(devices, shards, spread, delay, delivery):
    """The peak of the sum of trapezoids, evaluated at every corner (the rate is piecewise linear)."""
    a, b = min(delivery, delay), max(delivery, delay)
    sends = [k * spread / shards for k in range(shards)]
    return max(model_rate(devices, shards, spread, delay, delivery, s + c) for s in sends for c in (0, a, b, a + b))


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


SVG = "{http://www.w3.org/2000/svg}"


def test_the_chart_is_an_svg_whose_lines_reach_their_peaks(tmp_path):
    """The main line (the settings given) on its own scale, the other two in the log-scale panel, each line's highest
    point at its peak on its scale."""
    run, out = simulate(tmp_path, "--devices", "1000000", "--shards", "4", "--spread", "400", "--client-delay", "30")
    assert run.returncode == 0, run.stderr
    root = ET.parse(out).getroot()
    assert root.tag == SVG + "svg"
    main = root.find(f"{SVG}polyline[@class='main']")
    compared = root.findall(f"{SVG}polyline[@class='compared']")
    assert main.get("data-series") == "as set"
    assert [line.get("data-series") for line in compared] == ["as set", "no waves", "all at once"]
    plot = root.find(f"{SVG}rect[@id='plot']")
    bottom, height = float(plot.get("y")) + float(plot.get("height")), float(plot.get("height"))
    ticks = [float(t.get("data-value")) for t in root.findall(f"{SVG}text[@class='y-tick']")]
    top = max(ticks)
    points = [tuple(map(float, p.split(","))) for p in main.get("points").split()]
    xs = [x for x, _ in points]
    assert xs == sorted(xs)
    highest = max((bottom - y) / height * top for _, y in points)
    assert abs(highest - float(main.get("data-peak"))) / top < 1e-3
    assert abs(float(main.get("data-peak")) - model_peak(1_000_000, 4, 400, 30, 10)) < 0.1
    # The main scale is the main line's: "all at once" (100,000/s) does not set it.
    assert top < 2 * float(main.get("data-peak"))


def test_the_time_above_a_limit_is_shaded_and_stated(tmp_path):
    """--limit draws the backend's limit; the shaded spans are where the model's rate is above it, and the printed
    total is their length."""
    run, out = simulate(tmp_path, "--devices", "2000000", "--shards", "20", "--spread", "600", "--client-delay", "120", "--limit", "2500")
    assert run.returncode == 0, run.stderr
    stated = re.search(r"^Above the limit of 2,500 fetches/s for ([\d,.]+) s in all, from ([\d,.]+) s to ([\d,.]+) s\.$", run.stdout, re.M)
    assert stated, run.stdout
    root = ET.parse(out).getroot()
    spans = [(float(r.get("data-from")), float(r.get("data-to"))) for r in root.findall(f"{SVG}rect[@class='over-limit']")]
    assert spans and abs(sum(b - a for a, b in spans) - float(stated.group(1).replace(",", ""))) < 0.1
    # Worked out here: sample the model finely and measure the time above the limit.
    step = 0.05
    above = sum(step for i in range(int(700 / step)) if model_rate(2_000_000, 20, 600, 120, 10, (i + 0.5) * step) > 2500)
    assert abs(above - float(stated.group(1).replace(",", ""))) < 1
    assert root.find(f"{SVG}line[@class='limit']").get("data-value") == "2500.0"
    # A limit never reached is said so; one far above the peak does not set the scale.
    run, out = simulate(tmp_path, "--devices", "1000000", "--client-delay", "30", "--limit", "1000000")
    assert "Never above the limit of 1,000,000 fetches/s: the peak is 33,333.3 fetches/s." in run.stdout
    ticks = [float(t.get("data-value")) for t in ET.parse(out).getroot().findall(f"{SVG}text[@class='y-tick']")]
    assert max(ticks) < 2 * 33_333.4


def test_the_chart_reads_at_a_glance_in_a_browser(tmp_path, browser):
    """Headless Chromium draws the SVG: the main line spans most of the plot's height, and every labelled tick sits
    where its value falls on the scale the main line is drawn with."""
    run, out = simulate(tmp_path, "--devices", "2000000", "--shards", "20", "--spread", "600", "--client-delay", "120", "--limit", "2500")
    assert run.returncode == 0, run.stderr
    browser.get(out.as_uri())
    measured = browser.execute_script("""
        const box = e => { const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; };
        const plot = box(document.getElementById('plot'));
        const main = box(document.querySelector('polyline.main'));
        const ticks = cls => [...document.querySelectorAll('text.' + cls)].map(t => ({text: t.textContent, value: +t.dataset.value, box: box(t)}));
        return {plot, main, peak: +document.querySelector('polyline.main').dataset.peak, y: ticks('y-tick'), x: ticks('x-tick')};
    """)
    plot, main = measured["plot"], measured["main"]
    assert main["h"] / plot["h"] >= 0.6, measured
    bottom, top_value = plot["y"] + plot["h"], max(t["value"] for t in measured["y"])
    assert abs((bottom - main["y"]) / plot["h"] * top_value - measured["peak"]) / top_value < 0.01
    for tick in measured["y"]:
        assert float(tick["text"].replace(",", "")) == tick["value"]
        centre = tick["box"]["y"] + tick["box"]["h"] / 2
        assert abs(centre - (bottom - tick["value"] / top_value * plot["h"])) < 8, tick
    values = [t["value"] for t in measured["y"]]
    assert values[0] == 0 and len(set(b - a for a, b in zip(values, values[1:]))) == 1, "evenly spaced round ticks"
    last = max(t["value"] for t in measured["x"])
    for tick in measured["x"]:
        centre = tick["box"]["x"] + tick["box"]["w"] / 2
        assert abs(centre - (plot["x"] + tick["value"] / last * plot["w"])) < 8, tick
    shot(browser, "fetch-load")


def test_the_png_draws_what_the_svg_draws(tmp_path):
    """--out NAME.png writes a PNG (decoded here with zlib alone) whose main line spans the rows the SVG's does."""
    args = ["--devices", "2000000", "--shards", "20", "--spread", "600", "--client-delay", "120"]
    run, svg = simulate(tmp_path, *args)
    png = tmp_path / "load.png"
    assert subprocess.run([BINARY, "simulate", *args, "--out", str(png)], capture_output=True, timeout=60).returncode == 0
    width, height, pixels = decode_png(png.read_bytes())
    assert (width, height) == (1000, 580)
    root = ET.parse(svg).getroot()
    plot = root.find(f"{SVG}rect[@id='plot']")
    left, right = float(plot.get("x")), float(plot.get("x")) + float(plot.get("width"))
    ys = [float(p.split(",")[1]) for p in root.find(f"{SVG}polyline[@class='main']").get("points").split()]
    blue = (0x1A, 0x73, 0xE8)
    rows = [y for y in range(height) for x in range(int(left) + 2, int(right) - 2)
            if sum(abs(a - b) for a, b in zip(pixels[y][x], blue)) < 60]
    assert rows, "no pixel of the main line's colour"
    assert abs(min(rows) - min(ys)) <= 3 and abs(max(rows) - max(ys)) <= 3, (min(rows), max(rows), min(ys), max(ys))


def decode_png(data):
    """Width, height and rows of (r, g, b) of an 8-bit RGB PNG, filters None, Sub and Up."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, header = 8, b"", None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])[0], kind
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    width, height, depth, colour = header[:4]
    assert (depth, colour) == (8, 2)
    raw, stride, rows, previous = zlib.decompress(idat), width * 3, [], bytes(width * 3)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            if kind == 1:
                line[i] = (line[i] + (line[i - 3] if i >= 3 else 0)) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + previous[i]) & 0xFF
            else:
                assert kind == 0, f"filter {kind}"
        previous = bytes(line)
        rows.append([tuple(line[x * 3:x * 3 + 3]) for x in range(width)])
    return width, height, rows


def test_bad_settings_are_refused_with_a_reason_and_nothing_written(tmp_path):
    for args, word in [(["--shards", "0"], "shards"), (["--delivery", "0"], "delivery"), (["--devices", "-5"], "devices"),
                       (["--limit", "0"], "limit"), (["--limit", "nan"], "limit")]:
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
    # The picture the README and this page show is what the binary draws for that command, byte for byte.
    png = tmp_path / "docs.png"
    assert subprocess.run([BINARY, "simulate", *command, "--out", str(png)], capture_output=True, timeout=60).returncode == 0
    assert png.read_bytes() == (ROOT / "docs" / "fetch-load.png").read_bytes(), "regenerate docs/fetch-load.png (docs/waves.md says how)"
    assert "](fetch-load.png)" in text and "](docs/fetch-load.png)" in (ROOT / "README.md").read_text()
