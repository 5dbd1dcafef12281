#!/usr/bin/env python3
"""Where a process's resident file-backed pages lie: for each mapped file, the resident pages (from
/proc/PID/pagemap's present bit) by ELF section, and within code and read-only data, by symbol group (the Swift
module of a mangled name, ICU, C). Reads only /proc and the files (nm, readelf); needs root for pagemap.

    resident.py PID [--symbols FILE]   (FILE: a file with the binary's symbols, such as rc-relay.debug)
"""
import bisect
import collections
import re
import struct
import subprocess
import sys

PAGE = 4096


def mappings(pid):
    out = []
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        out.append((start, end, parts[1], int(parts[2], 16), parts[5]))
    return out


def present(pid, start, end):
    pages = []
    with open(f"/proc/{pid}/pagemap", "rb") as f:
        f.seek(start // PAGE * 8)
        data = f.read((end - start) // PAGE * 8)
    for i in range(len(data) // 8):
        (entry,) = struct.unpack_from("<Q", data, i * 8)
        if entry >> 63 & 1:
            pages.append(start + i * PAGE)
    return pages


def sections(path):
    """(file offset, size, name, address) of each allocated section."""
    out = []
    text = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True).stdout
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+\S+\s+(\S*A\S*)", text):
        name, addr, off, size = m.group(1), int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16)
        if size:
            out.append((off, size, name, addr))
    return sorted(out)


def segments(path):
    """(file offset, virtual address) of each LOAD segment, to turn a file offset into a link-time address."""
    text = subprocess.run(["readelf", "-l", "-W", path], capture_output=True, text=True).stdout
    return [(int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16))
            for m in re.finditer(r"LOAD\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+\S+\s+0x([0-9a-f]+)", text)]


def group(symbol):
    m = re.match(r"_?\$s(\d+)(\w)", symbol)
    if m:
        n = int(m.group(1))
        rest = symbol[symbol.index(m.group(1)) + len(m.group(1)):]
        return "swift " + rest[:n]
    if symbol.startswith(("$ss", "_$ss")):
        return "swift Swift"
    if re.match(r"(icu_|u_|ucol_|ubrk_|ures_|udata_|ucnv_|uloc_|_ZN6icu_|icudt)", symbol):
        return "ICU"
    if symbol.startswith("_ZN"):
        return "C++"
    return "C or other"


def symbols(path):
    text = subprocess.run(["nm", "-n", "--defined-only", path], capture_output=True, text=True).stdout
    addrs, names = [], []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].lower() in "tdrbv":
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    return addrs, names


def main():
    pid = int(sys.argv[1])
    symfile = sys.argv[sys.argv.index("--symbols") + 1] if "--symbols" in sys.argv else None
    by_file = collections.defaultdict(list)
    for start, end, perms, offset, path in mappings(pid):
        for page in present(pid, start, end):
            by_file[path].append((page - start + offset, perms))
    total = sum(len(v) for v in by_file.values())
    print(f"resident file-backed pages: {total} ({total * PAGE / 1e6:.1f} MB)")
    for path, pages in sorted(by_file.items(), key=lambda kv: -len(kv[1])):
        print(f"\n{path}: {len(pages) * PAGE / 1e6:.1f} MB")
        secs = sections(path)
        offs = [s[0] for s in secs]
        segs = segments(path)
        syms = symbols(symfile if symfile and path.endswith("rc-relay") else path)
        per_section, per_group = collections.Counter(), collections.Counter()
        for off, perms in pages:
            i = bisect.bisect_right(offs, off) - 1
            name = secs[i][2] if i >= 0 and off < secs[i][0] + secs[i][1] + PAGE else "(headers)"
            per_section[f"{name} ({perms})"] += 1
            seg = next(((o, v) for o, v, size in segs if o <= off < o + size), None)
            if seg and syms[0]:
                addr = off - seg[0] + seg[1]
                j = bisect.bisect_right(syms[0], addr) - 1
                per_group[group(syms[1][j]) if j >= 0 else "(none)"] += 1
        for name, n in per_section.most_common(12):
            print(f"  {n * PAGE / 1e6:6.2f} MB  {name}")
        if per_group:
            print("  by symbol group (the symbol at or before each page's start):")
            for name, n in per_group.most_common(15):
                print(f"  {n * PAGE / 1e6:6.2f} MB  {name}")


if __name__ == "__main__":
    main()
