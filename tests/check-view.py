#!/usr/bin/env python3
# memres - CUDA memory resources
# check-view.py: `memres view` and its page. Without a browser: the data the page holds, read
# back from the HTML with Python's json module (peaks and event counts per layer and per tag
# re-summed from the CSV, the largest allocations, the marks, the snapshot as given) and the
# command's errors. In a real browser (Debian's chromium, headless; those cases skip without
# it, or with MEMRES_CHROMIUM=none): the DOM after the page's script ran (the numbers shown match
# the log's and the snapshot's, the segments and blocks drawn, no error; the first view's columns
# of pixels hold the log's least and most bytes in each: exactly where the page draws the steps,
# within the buckets' width where it draws its pyramid of buckets), a screenshot of the
# fixed page checked in chosen regions with a tolerance (the out-of-memory marker's column, the
# used series' colour in the plot, the used blocks' colour in the segment map), the console
# free of errors, and a large log (MEMRES_VIEW_EVENTS events, default 1,000,000, at least 64; the
# issue's scale is 10,000,000) drawn, its page's size and first-view and zoom times printed: at
# most 100,000 events (cmd-view.c's MAX_STEPS) the page holds every step, past it buckets.
# A snapshot's call stacks (track:backtrace=true, tests/stack-sites.c's, made in functions of
# known names): in the page's data as the snapshot has them, and in the browser the tooltip over a
# used block of its segment map shows its frames (the block's function innermost).
# TAP output. Usage: check-view.py MEMRES STACK_SITES
import bisect
import csv
import html
import html.parser
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from urllib.parse import unquote

memres = sys.argv[1]
stack_sites = sys.argv[2]
tests = []
HEADER = "Thread,Time,Action,Pointer,Size,Stream"
# tools/cmd-view.c's MAX_STEPS: a series of at most this many events holds every step
VIEW_MAX_STEPS = 100000


def check(ok, what, skip=None):
    tests.append((ok, what, skip))


def clock(us):
    return "%02d:%02d:%02d.%06d" % (us // 3600000000 % 24, us // 60000000 % 60,
                                     us // 1000000 % 60, us % 1000000)


def write_fixed_log(path):
    """2,000 events on two threads with tags, an out of memory at line 1503, a trim."""
    rng = random.Random(35)
    lines = [HEADER + ",Tag"]
    t = 10 * 3600 * 10**6
    live = {}
    for i in range(2000):
        t += 1000
        if live and rng.random() < 0.45:
            p = rng.choice(sorted(live))
            size, tag = live.pop(p)
            lines.append("%d,%s,free,0x%x,%d,0x0,%s" % (100 + i % 2, clock(t), p, size, tag))
        else:
            p = 0x10000 + i * 0x100000
            size = rng.randint(1, 100) * 4096
            tag = rng.choice(["weights", "activations", ""])
            live[p] = (size, tag)
            lines.append("%d,%s,allocate,0x%x,%d,0x0,%s" % (100 + i % 2, clock(t), p, size, tag))
        if i == 1500:
            lines.append("100,%s,allocate failure,0x0,%d,0x0," % (clock(t), 1 << 34))
            lines.append("100,%s,out of memory,0x0,%d,0x0," % (clock(t), 1 << 34))
        if i == 1800:
            lines.append("101,%s,trim,0x0,0,0x0," % clock(t))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# A fixed log with segment lines (log:segments=true) and a sleep and wake: at 65 us one segment
# of 1 MiB holds two blocks (256 KiB at 0x100000, 64 KiB at 0x180000) and two holes (256 KiB at
# 0x140000, 448 KiB at 0x190000); at 95 us a second segment, mapped at 70 us with 2 MiB and
# grown to 4 MiB at 85 us, holds 1 MiB at 0x200000 and 512 KiB at 0x300000, its hole of 2.5 MiB
# at 0x380000 the largest.
SEGMENT_LOG = """Thread,Time,Action,Pointer,Size,Stream,Tag
7,10:00:00.000000,segment mapped,0x100000,1048576,0x0,
7,10:00:00.000010,allocate,0x100000,262144,0x0,w
7,10:00:00.000020,allocate,0x140000,131072,0x0,kv
8,10:00:00.000030,allocate,0x180000,65536,0x5,kv
7,10:00:00.000040,free,0x140000,131072,0x0,kv
7,10:00:00.000050,sleep backup,0x0,65536,0x0,kv
7,10:00:00.000060,wake backup,0x0,65536,0x0,kv
7,10:00:00.000070,segment mapped,0x200000,2097152,0x0,
7,10:00:00.000080,allocate,0x200000,1048576,0x0,w
7,10:00:00.000085,segment grown,0x200000,4194304,0x0,
7,10:00:00.000090,allocate,0x300000,524288,0x0,
7,10:00:00.000100,free,0x200000,1048576,0x0,w
7,10:00:00.000110,segment unmapping,0x200000,4194304,0x0,
"""
# A fixed log with the Backtrace column (log:backtrace=true): two allocations of one stack (its
# frames once in the page), one whose frames hold an escaped ',' and ';', one without a stack,
# one of 40 frames (the page holds 32 of them, and the count).
MAIN = "/opt/app/train(main+0x44) [0x4010f4]"
LOAD = ["/opt/app/train(load_weights+0x1c) [0x401a2c]", MAIN,
        "/lib/x86_64-linux-gnu/libc.so.6(__libc_start_main+0x85) [0x7f000000002a]"]
STEP = ["/opt/app/my,app(step;2+0x10) [0x402000]", MAIN]
DEEP = ["/opt/app/train(recurse+0x%x) [0x403%03x]" % (i, i) for i in range(40)]


def bt_field(frames):
    return ";".join(f.replace("%", "%25").replace(",", "%2C").replace(";", "%3B")
                    for f in frames)


BACKTRACE_LOG = "\n".join([
    "Thread,Time,Action,Pointer,Size,Stream,Backtrace,Tag",
    "7,10:00:00.000000,allocate,0x100000,1048576,0x0,%s,w" % bt_field(LOAD),
    "7,10:00:00.000010,allocate,0x200000,4096,0x0,%s,kv" % bt_field(LOAD),
    "8,10:00:00.000020,allocate,0x300000,2097152,0x0,%s,w" % bt_field(STEP),
    "7,10:00:00.000030,allocate,0x400000,512,0x0,,",
    "7,10:00:00.000040,allocate,0x500000,8192,0x0,%s," % bt_field(DEEP),
    "8,10:00:00.000050,free,0x300000,2097152,0x0,,w",
    "7,10:00:00.000060,allocate failure,0x0,1073741824,0x0,%s," % bt_field(STEP),
    "7,10:00:00.000060,out of memory,0x0,1073741824,0x0,%s," % bt_field(STEP), ""])
# the pointer of each allocation -> its frames as the page should hold them, and their count
BACKTRACES = {"0x300000": (STEP, 2), "0x100000": (LOAD, 3), "0x500000": (DEEP[:32], 40),
              "0x200000": (LOAD, 3), "0x400000": (None, 0)}

# per moment: (segments, mapped bytes, used blocks, used bytes, holes, largest hole, its address)
SEGMENT_MAPS = {65: (1, 1 << 20, 2, 327680, 2, 458752, "0x190000"),
                95: (2, 5 << 20, 4, 1900544, 3, 2621440, "0x380000")}


def live_at(path, t):
    """The allocations of a log live at @t us after its first line: (size, pointer, stream,
    thread, line)."""
    live, t0 = {}, None
    with open(path) as f:
        f.readline()
        for n, fields in enumerate(csv.reader(f), 2):
            thread, tm, action, pointer, size, stream = fields[:6]
            h, m, sec = tm.split(":")
            us = (int(h) * 3600 + int(m) * 60) * 10**6 + round(float(sec) * 10**6)
            t0 = us if t0 is None else t0
            if us - t0 > t:
                break
            if action == "allocate":
                live[pointer] = (int(size), pointer, stream, thread, n)
            elif action == "free":
                live.pop(pointer, None)
    return sorted(live.values(), reverse=True)


def expected(path):
    """Per series (the layer, then each tag in the order first seen): events, peak, final; the
    largest allocation; the marks (action, time in us since the first line)."""
    series = {None: [0, 0, 0]}
    live, sizes, marks, t0 = {}, [], [], None
    with open(path) as f:
        header = f.readline().strip()
        for fields in csv.reader(f):  # the Tag quoted where it holds a comma or a quote
            thread, tm, action, pointer, size = fields[:5]
            tag = fields[6] if len(fields) == 7 else ""
            h, m, s = tm.split(":")
            us = (int(h) * 3600 + int(m) * 60) * 10**6 + round(float(s) * 10**6)
            t0 = us if t0 is None else t0
            if action == "allocate":
                live[pointer] = (int(size), tag)
                sizes.append(int(size))
                delta = int(size)
            elif action == "free":
                if pointer not in live:
                    continue
                size, tag = live.pop(pointer)
                delta = -size
            else:
                marks.append((action, us - t0))
                continue
            keys = [None, tag]
            for k in keys:
                e = series.setdefault(k, [0, 0, 0])
                e[0] += 1
                e[2] += delta
                e[1] = max(e[1], e[2])
    if list(series) == [None, ""]:  # no line names a tag
        del series[""]
    return series, max(sizes), marks


def layer_steps(path):
    """The layer's bytes after each allocate and free of a log in time order: times (us since
    its first line) and values."""
    T, V, live, t0, used = [], [], {}, None, 0
    with open(path) as f:
        f.readline()
        for fields in csv.reader(f):
            tm, action, pointer, size = fields[1:5]
            h, m, s = tm.split(":")
            us = (int(h) * 3600 + int(m) * 60) * 10**6 + round(float(s) * 10**6)
            t0 = us if t0 is None else t0
            if action == "allocate":
                live[pointer] = int(size)
                used += int(size)
            elif action == "free" and pointer in live:
                used -= live.pop(pointer)
            else:
                continue
            T.append(us - t0)
            V.append(used)
    return T, V


def columns_wrong(cols, T, V, W, a, b, exact):
    """The columns of the first view whose least and most bytes are not the series': exact,
    those of the steps in each column (with the value carried in, as the page computes them);
    else bounded by the true least and most in the column (buckets only widen them) and by
    those within two columns around it (a bucket is at most a column wide)."""
    lo, hi = cols
    px, wrong = (b - a) / W, []
    i = bisect.bisect_left(T, a + 1) - 1
    cur = V[i] if i >= 0 else 0
    for x in range(W):
        s, e = a + x * px, a + (x + 1) * px
        j = bisect.bisect_left(T, e)
        col = [cur] + V[i + 1:j]
        if j - 1 > i:
            cur, i = V[j - 1], j - 1
        if exact:
            ok = lo[x] == min(col) and hi[x] == max(col)
        else:
            k0 = bisect.bisect_right(T, s - 2 * px) - 1
            k1 = bisect.bisect_left(T, e + 2 * px)
            wide = ([V[k0]] if k0 >= 0 else [0]) + V[max(k0 + 1, 0):k1]
            ok = lo[x] is not None and min(wide) <= lo[x] <= min(col) and \
                max(col) <= hi[x] <= max(wide)
        if not ok:
            wrong.append((x, lo[x], hi[x], min(col), max(col)))
    return wrong


def page_data(path):
    text = open(path).read()
    start = text.index('<script id="memres-data" type="application/json">')
    start = text.index(">", start) + 1
    end = text.index("</script>", start)
    return json.loads(text[start:end]), text


def run(*args):
    return subprocess.run([memres, *args], capture_output=True, text=True)


# ---- the browser ------------------------------------------------------------------------------

def find_chromium():
    name = os.environ.get("MEMRES_CHROMIUM")
    if name == "none":
        return None
    for n in ([name] if name else ["chromium", "chromium-browser", "google-chrome"]):
        p = shutil.which(n)
        if p:
            return p
    return None


CHROMIUM = find_chromium()
WINDOW = "1280,2400"


def browse(url, profile, what, budget_ms=None):
    """chromium --headless with --dump-dom (what="dom") or --screenshot=PATH: (stdout, the
    console's lines)."""
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + profile,
            "--window-size=" + WINDOW, "--force-device-scale-factor=1",
            "--enable-logging=stderr", "--v=0"]
    if budget_ms:
        args.append("--virtual-time-budget=%d" % budget_ms)
    args += ["--dump-dom"] if what == "dom" else ["--screenshot=" + what]
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="disabled:")
    r = subprocess.run(args + [url], capture_output=True, text=True, timeout=240, env=env)
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l]
    return r.stdout, console


class Dom(html.parser.HTMLParser):
    """The elements that matter: the status element's attributes, the legend's spans, the
    canvases of the segment map, each table's cells' data-value by class."""

    def __init__(self, text):
        super().__init__()
        self.status, self.legend, self.segmaps, self.tables = {}, [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "memres-view-status":
            self.status = a
        elif tag == "span" and a.get("class", "").startswith("series"):
            self.legend.append(a)
        elif tag == "canvas" and a.get("class") == "segmap":
            self.segmaps.append(a)
        elif tag == "table":
            self.tables.append({"class": a.get("class"), "id": a.get("id"), "cells": []})
        elif tag == "td" and self.tables:
            self.tables[-1]["cells"].append(a.get("data-value"))


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG, not interlaced."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return w, h, rows


def near(px, rgb, tol=40):
    return all(abs(p - q) <= tol for p, q in zip(px, rgb))


def hexrgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


# ---- the cases --------------------------------------------------------------------------------

with tempfile.TemporaryDirectory() as d:
    log = os.path.join(d, "fixed.csv")
    snap = os.path.join(d, "snap.json")
    page = os.path.join(d, "page.html")
    write_fixed_log(log)
    series, largest, marks = expected(log)

    # a snapshot of a known state: blocks in chunks of the cache, the live ones in track
    r = run("snapshot", "-a", "4KiB", "-a", "4KiB", "-a", "100KiB", "-a", "1MiB", "--close", "2",
            "track>cache:chunk=64KiB>host", "-o", snap)
    check(r.returncode == 0, "memres snapshot for the page: " + r.stderr.strip())
    doc = json.load(open(snap))
    n_segments = sum(len(l["segments"]) for l in doc["layers"])
    n_blocks = sum(len(l["blocks"]) for l in doc["layers"])

    r = run("view", log, snap, "-o", page)
    check(r.returncode == 0, "memres view LOG SNAPSHOT -o page.html: " + r.stderr.strip())
    data, text = page_data(page)
    check("http://" not in text and "https://" not in text and "src=" not in text,
          "the page names no network address and loads nothing")
    got = {s["tag"]: [s["events"], s["peak"], s["final"]] for s in data["series"]}
    check(got == series, "the series (layer, then per tag): events, peak and final bytes re-summed "
          "from the CSV: %s / %s" % (got, series))
    check(data["series"][0]["steps"] is not None and len(data["series"][0]["steps"]["t"]) ==
          series[None][0], "up to 100,000 events the page holds every step")
    check(data["top"]["rows"][0][1] == largest, "the largest allocation first: %d" % largest)
    check(sorted(r[1] for r in data["top"]["rows"]) == sorted(
        r[1] for r in data["top"]["rows"]) and len(data["top"]["rows"]) == sum(
        1 for l in open(log) if ",allocate," in l), "every allocation of a small log is among "
          "the largest kept")
    check([(m[2], m[1]) for m in data["marks"]] == marks, "the marks: %s" % marks)
    snap_back = {k: v for k, v in data["snapshots"][0].items() if k != "_file"}
    check(snap_back == doc and data["snapshots"][0]["_file"] == snap,
          "the snapshot in the page is the one given")

    # segment lines, a sleep and a wake: the page's data
    seg_log, seg_page = os.path.join(d, "segments.csv"), os.path.join(d, "segments.html")
    with open(seg_log, "w") as f:
        f.write(SEGMENT_LOG)
    r = run("view", seg_log, "-o", seg_page)
    seg_data = page_data(seg_page)[0] if r.returncode == 0 else {"marks": [], "map": {}}
    check([m[2:4] + m[6:] for m in seg_data["marks"]] ==
          [["sleep backup", 65536, "kv"], ["wake backup", 65536, "kv"]],
          "the sleep and wake lines are marks with their bytes and tag: %s" % seg_data["marks"])
    check(seg_data["map"].get("segments") == [
        [0, 0, 0, "0x100000", 1 << 20], [0, 70, 0, "0x200000", 2 << 20],
        [0, 85, 1, "0x200000", 4 << 20], [0, 110, 2, "0x200000", 4 << 20]] and
          [a[1:] for a in seg_data["map"].get("allocs", [])] ==
          [[10, -1, "0x100000", 262144], [20, 40, "0x140000", 131072],
           [30, -1, "0x180000", 65536], [80, 100, "0x200000", 1 << 20],
           [90, -1, "0x300000", 524288]],
          "the segment lines and the allocations of the log, for the map at any moment")

    # backtraces: each top allocation's stack by index, each stack and each frame once
    bt_log, bt_page = os.path.join(d, "backtrace.csv"), os.path.join(d, "backtrace.html")
    with open(bt_log, "w") as f:
        f.write(BACKTRACE_LOG)
    r = run("view", bt_log, "-o", bt_page)
    bt_data = page_data(bt_page)[0] if r.returncode == 0 else {"top": {"rows": []}}
    got = {}
    for row in bt_data["top"]["rows"]:
        st = bt_data["stacks"][row[8]] if row[8] is not None else None
        got[row[4]] = ([bt_data["frames"][i] for i in st[1:]], st[0]) if st else (None, 0)
    check(r.returncode == 0 and got == BACKTRACES,
          "each allocation's backtrace in the page: its frames as logged (escapes undone), at "
          "most 32, and its count: %s" % (r.stderr.strip() or {k: (v[0][:2] if v[0] else None,
                                                                   v[1]) for k, v in got.items()}))
    check(r.returncode == 0 and len(bt_data["stacks"]) == 3 and
          len(bt_data["frames"]) == len(set(bt_data["frames"])) == 2 + 2 + 32 and
          bt_data["top"]["rows"][1][8] == bt_data["top"]["rows"][3][8],
          "stacks and frames stored once each: %d stacks, %d frames" % (
              len(bt_data.get("stacks", [])), len(bt_data.get("frames", []))))
    # the out of memory's and its allocate failure's stack: the marks refer to it
    bt_marks = [(m[2], m[6], [bt_data["frames"][i] for i in bt_data["stacks"][m[7]][1:]])
                for m in bt_data.get("marks", []) if len(m) > 7]
    check(bt_marks == [("allocate failure", None, STEP), ("out of memory", None, STEP)] and
          len(bt_data["marks"]) == 2 and bt_data["marks"][0][7] == bt_data["top"]["rows"][0][8],
          "the failure's and the out of memory's marks refer to their stack (the one of the "
          "largest allocation, stored once): %s" % bt_marks)
    # the commands that read logs read this one too
    r_t = run("trace", bt_log)
    r_r = run("replay", bt_log, "host")
    check(r_t.returncode == 0 and json.loads(r_t.stdout)["traceEvents"] and r_r.returncode == 0,
          "memres trace and replay read a log with the Backtrace column: %s %s" % (
              r_t.stderr.strip(), r_r.stderr.strip()))
    # a log the log adaptor wrote with backtrace=true: the page holds its frames as logged
    real_log, real_page = os.path.join(d, "real.csv"), os.path.join(d, "real.html")
    r = run("alloc", "log:path=%s,backtrace=true>host" % real_log.replace(",", "\\,"), "1MiB")
    logged, head = [], None
    if r.returncode == 0:
        with open(real_log) as f:
            head = f.readline().rstrip("\n")
            line = f.readline().rstrip("\n").split(",")
        logged = [unquote(x) for x in line[6].split(";")]
    r = run("view", real_log, "-o", real_page) if logged else r
    real = page_data(real_page)[0] if r.returncode == 0 and logged else \
        {"top": {"rows": [[None] * 10]}}
    row = real["top"]["rows"][0]
    real_frames = [real["frames"][i] for i in real["stacks"][row[8]][1:]] if row[8] is not None \
        else []
    check(head == HEADER + ",Backtrace" and row[1] == 1 << 20 and real_frames == logged and
          real_frames and os.path.basename(memres) + "(" in real_frames[0] and
          not any("libmemres" in f for f in real_frames),
          "memres alloc through log:backtrace=true: the page holds the allocation's frames as "
          "logged, the first in the memres program, none in libmemres: %s" % real_frames[:3])
    # malformed Backtrace fields: refused with the line named, MEMRES_ERROR INVALID_ARGUMENT
    bad_bt = os.path.join(d, "bad-backtrace.csv")
    for field, want in [("a%2", "'%' not followed by two hex digits"),
                        ("a%zzb", "'%' not followed by two hex digits"),
                        ("a%00b", "'%' not followed by two hex digits"),
                        ("a;;b", "frame 2 is empty"), (";a", "frame 1 is empty"),
                        ("a;", "frame 2 is empty"),
                        (";".join(["f"] * 65), "more than 64 frames")]:
        with open(bad_bt, "w") as f:
            f.write("Thread,Time,Action,Pointer,Size,Stream,Backtrace\n"
                    "7,10:00:00.000000,allocate,0x100000,64,0x0,%s\n" % field)
        r = run("view", "--json", bad_bt, "-o", page)
        err = json.loads(r.stdout).get("error", {}) if r.stdout.startswith("{") else {}
        check(r.returncode == 2 and err.get("domain") == "memres-error-quark" and
              err.get("code_name") == "MEMRES_ERROR_INVALID_ARGUMENT" and
              "bad-backtrace.csv:2: invalid Backtrace" in err.get("message", "") and
              want in err.get("message", ""),
              "a Backtrace %r is refused (%s): %s" % (field[:20], want, err))

    # the snapshot at an out-of-memory failure (MEMRES_OOM_SNAPSHOT) carries its report
    oom_snap = os.path.join(d, "oom.json")
    r = subprocess.run([memres, "alloc", "limit:max=1KiB>host", "4KiB"], capture_output=True,
                       text=True, env=dict(os.environ, MEMRES_OOM_SNAPSHOT=oom_snap))
    oom_doc = json.load(open(oom_snap)) if os.path.exists(oom_snap) else {}
    check(r.returncode != 0 and "limit" in oom_doc.get("oom_report", ""),
          "an out-of-memory snapshot holds its report: %s" % oom_doc.get("oom_report"))

    # a '<' of an input cannot end the script element: a path with "</script>" in it
    os.mkdir(os.path.join(d, "a<"))
    odd = os.path.join(d, "a<", "script><b>.json")
    shutil.copy(snap, odd)
    r = run("view", odd, "-o", page)
    data2, text2 = page_data(page)
    check(r.returncode == 0 and data2["inputs"] == [odd] and "</script><b>" not in text2,
          "an input named .../a</script><b>.json is written escaped")

    # reserved bytes: the fixed log replayed through log>cache>log>host; the lower log's bytes
    # are what the cache holds from host, drawn as reserved (--reserved)
    used_log, res_log = os.path.join(d, "used.csv"), os.path.join(d, "reserved.csv")
    r = run("replay", log, "log:path=%s>cache:chunk=1MiB>log:path=%s>host" % (used_log, res_log))
    check(r.returncode == 0, "memres replay through two logs around a cache: " + r.stderr.strip())
    res_page = os.path.join(d, "reserved.html")
    r = run("view", used_log, "--reserved", res_log, "-o", res_page)
    res_data = page_data(res_page)[0] if r.returncode == 0 else {"series": [], "inputs": []}
    used_series, res_series = expected(used_log)[0], expected(res_log)[0]
    check([(s["name"], s["what"], s["peak"], s["events"]) for s in res_data["series"]] ==
          [("used.csv", "used", used_series[None][1], used_series[None][0]),
           ("reserved.csv", "reserved", res_series[None][1], res_series[None][0])] and
          res_data["inputs"] == [used_log, res_log] and
          res_series[None][1] >= used_series[None][1],
          "--reserved LOG: a series of what the cache reserved (peak %d re-summed from its log, "
          "used %d): %s" % (res_series[None][1], used_series[None][1],
                            [(s["name"], s["what"], s["peak"]) for s in res_data["series"]]))
    r = run("view", log, "--reserved", snap, "-o", page)
    check(r.returncode == 2 and "--reserved %s: a snapshot, not a log" % snap in r.stderr,
          "--reserved refuses a snapshot: " + r.stderr.strip())
    # a --reserved LOG alone is refused: reserved bytes of a layer whose used bytes are not given
    # (it made a page of one "reserved" series and exit status 0)
    if os.path.exists(page):
        os.unlink(page)
    r = run("view", "--reserved", res_log, "-o", page)
    check(r.returncode == 2 and "view: --reserved LOG without an INPUT" in r.stderr and
          r.stdout == "" and not os.path.exists(page),
          "--reserved LOG alone is a usage error: %d %s" % (r.returncode, r.stderr.strip()))
    r = run("view", log, "--reserved", res_log, "-o", res_log)
    check(r.returncode == 2 and "is --reserved LOG 1: refused" in r.stderr and
          open(res_log).readline().startswith("Thread"),
          "-o naming a --reserved LOG is refused: " + r.stderr.strip())

    # errors
    bad = os.path.join(d, "bad.json")
    open(bad, "w").write('{"memres_snapshot": 1, "layers": [}')
    r = run("view", bad, "-o", page)
    check(r.returncode == 2 and "bad.json: not a snapshot: invalid JSON at byte 34" in r.stderr,
          "invalid JSON is refused, naming the byte: " + r.stderr.strip())
    other = os.path.join(d, "other.json")
    open(other, "w").write('{"traceEvents": []}')
    r = run("view", other)
    check(r.returncode == 2 and "JSON but not a snapshot" in r.stderr, "JSON that is not a "
          "snapshot is refused: " + r.stderr.strip())
    # the string "memres_snapshot" somewhere is no snapshot: the top-level member is, of format 1
    for text, want in [('{"note": "memres_snapshot"}', "no top-level member"),
                       ('{"x": {"memres_snapshot": 1}}', "no top-level member"),
                       ('{"memres_snapshot": 2, "layers": []}', "a snapshot of format 2"),
                       ('{"memres_snapshot": "1"}', 'a snapshot of format "1"'),
                       ('{"memres_snapshot": 1}', 'without its "layers" array'),
                       ('{"memres_snapshot": 1, "layers": {}}', 'without its "layers" array'),
                       ('["memres_snapshot", 1]', "expected the header"),
                       ('{"memres_allocator_snapshot": 1, "devices": {"0": {"a": 1}}}',
                        "not a snapshot file of the allocator shim"),
                       ('{"memres_allocator_snapshot": 2, "devices": {}}',
                        "not a snapshot file of the allocator shim")]:
        open(other, "w").write(text)
        r = run("view", other)
        check(r.returncode == 2 and want in r.stderr and r.stdout == "",
              "%s is refused (%s): %s" % (text, want, r.stderr.strip()))
    # JSON of format 1 whose values are not what docs/snapshot.schema.json says: refused naming
    # the JSON path of the first wrong one (a layer {"kind": 5} made a page of nonsense, exit 0)
    with open(snap) as f:
        good = json.load(f)
    def broken(change):
        doc = json.loads(json.dumps(good))
        change(doc)
        return json.dumps(doc)
    block = {"address": "0x1000", "size": 64, "stream": "default", "tag": "", "state": "used"}
    for text, want in [
            ('{"memres_snapshot": 1, "layers": [{"kind": 5}]}',
             "not a snapshot of format 1: layers[0].kind: 5 is not a kind's name"),
            ('{"memres_snapshot": 1, "layers": []}', "layers is empty"),
            (broken(lambda d: d["layers"][0].pop("position")), "layers[0].position is missing"),
            (broken(lambda d: d.pop("summary")), ": summary is missing"),
            (broken(lambda d: d["layers"][-1]["blocks"].append(dict(block, size=-64))),
             "layers[%d].blocks[%d].size: -64 is not an integer from 0 to 2^64 - 1" %
             (len(good["layers"]) - 1, len(good["layers"][-1]["blocks"]))),
            (broken(lambda d: d["layers"][0]["blocks"].insert(0, dict(block, state="lost"))),
             'layers[0].blocks[0].state: "lost" is not a block\'s state'),
            (broken(lambda d: d["layers"][0]["holes"].append({"address": 4096, "size": 1})),
             "layers[0].holes[%d].address: 4096 is not an address" % len(good["layers"][0]["holes"])),
            (broken(lambda d: d["summary"].update(fragmentation=1.5)),
             "summary.fragmentation: 1.5 is neither a number in [0, 1] nor null"),
            (broken(lambda d: d["layers"][0]["figures"].update(x="big")),
             'layers[0].figures.x: "big" is not an integer from 0 to 2^64 - 1'),
            # past 64 bits: no address or count memres writes (they were drawn)
            (broken(lambda d: d["layers"][0]["blocks"].insert(0, dict(block, size=2**64))),
             "layers[0].blocks[0].size: 18446744073709551616 is not an integer from 0 to "
             "2^64 - 1"),
            (broken(lambda d: d["layers"][0]["blocks"].insert(0, dict(block,
                                                                     address="0x1" + "0" * 16))),
             'layers[0].blocks[0].address: "0x10000000000000000" is not an address (a string 0x '
             'and 1 to 16 lowercase hex digits)'),
            (broken(lambda d: d["layers"][0]["blocks"].insert(0, dict(block,
                                                                     stream="0x" + "f" * 17))),
             'layers[0].blocks[0].stream: "0x' + "f" * 17 + '" is not a stream'),
            (broken(lambda d: d["layers"][0].update(reserved=2**70)),
             "layers[0].reserved: 1180591620717411303424 is neither an integer from 0 to 2^64 - 1 "
             "nor null"),
            (json.dumps(good)[:-1] + ', "device": 0}', ": device given twice"),
            # a stack naming a frame, or a block naming a stack, the snapshot does not hold
            # (the page's tooltip over the block threw a TypeError)
            (broken(lambda d: (d.update(frames=["a(f+0x1) [0x1]"], stacks=[[2, 0, 5]]),
                               d["layers"][0]["blocks"].insert(0, dict(block, stack=0)))),
             "stacks[0][2]: 5 is not an index into frames (the snapshot has 1)"),
            (broken(lambda d: (d.update(frames=["a(f+0x1) [0x1]"], stacks=[[1, 0]]),
                               d["layers"][0]["blocks"].insert(0, dict(block, stack=3)))),
             "layers[0].blocks[0].stack: 3 is not an index into stacks (the snapshot has 1)"),
            (broken(lambda d: d["layers"][0]["blocks"].insert(0, dict(block, stack=0))),
             "layers[0].blocks[0].stack: 0 is not an index into stacks (the snapshot has 0)"),
            ('{"memres_allocator_snapshot": 1, "devices": {"0": %s, "1": %s}}'
             % (json.dumps(good), broken(lambda d: d["layers"][0]["blocks"].insert(
                 0, dict(block, stack=0)))),
             "devices.1.layers[0].blocks[0].stack: 0 is not an index into stacks"),
            ('{"memres_allocator_snapshot": 1, "devices": {"0": %s, "1": %s}}'
             % (json.dumps(good), broken(lambda d: d["layers"][0].update(adaptor="yes"))),
             'devices.1.layers[0].adaptor: "yes" is not true or false')]:
        open(other, "w").write(text)
        r = run("view", other)
        check(r.returncode == 2 and "other.json: " in r.stderr and want in r.stderr and
              r.stdout == "", "a snapshot that breaks the schema is refused (%s): %s"
              % (want, r.stderr.strip()))
    # what the schema does not name is let through (format 1 grows without a new format)
    open(other, "w").write(broken(lambda d: d["layers"][0].update(new_member=[1])))
    r = run("view", other, "-o", page)
    check(r.returncode == 0, "an unknown member is let through: " + r.stderr.strip())
    # a crafted log whose times go back past midnight every other line (a day each): past
    # 1,000 days it is refused naming the line (the bucket arithmetic wrapped past ~3,200 days)
    days = os.path.join(d, "days.csv")
    with open(days, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n")
        for i in range(2100):
            f.write("1,%s,allocate,0x%x,64,0x0\n" % ("12:00:01.000000" if i % 2 == 0
                                                    else "00:00:00.000000", 0x1000 + 64 * i))
    r = run("view", days)
    check(r.returncode == 2 and "days.csv:2003: the times pass midnight more than 1000 times"
          in r.stderr and r.stdout == "", "a log of more than 1,000 days is refused: "
          + r.stderr.strip())
    r = run("trace", days)
    check(r.returncode == 2 and "days.csv:2003:" in r.stderr, "trace refuses it too: "
          + r.stderr.strip())
    missing = os.path.join(d, "missing.csv")
    r = run("view", missing)
    check(r.returncode == 2 and "missing.csv: No such file" in r.stderr,
          "a missing input is named as missing: " + r.stderr.strip())
    notlog = os.path.join(d, "notlog.csv")
    open(notlog, "w").write("a,b\n")
    r = run("view", notlog)
    check(r.returncode == 2 and "notlog.csv:1: expected the header" in r.stderr,
          "a file that is neither is refused as a log without its header: " + r.stderr.strip())
    r = run("view", log, "-o", log)
    check(r.returncode == 2 and "is INPUT 1: refused" in r.stderr and
          open(log).readline().startswith("Thread"), "-o naming an input is refused before "
          "anything is written: " + r.stderr.strip())
    r = run("view", d)
    check(r.returncode == 2 and "not a regular file" in r.stderr, "a directory is refused")
    r = run("view")
    check(r.returncode == 2 and "expected LOG or SNAPSHOT" in r.stderr, "no operand: usage")

    # a snapshot with call stacks (track:backtrace=true): in the page as the snapshot has them
    sites_log, sites_snap = os.path.join(d, "sites.csv"), os.path.join(d, "sites.json")
    sites_page = os.path.join(d, "sites.html")
    r = subprocess.run([stack_sites, sites_log, sites_snap], capture_output=True, text=True)
    check(r.returncode == 0, "stack-sites runs: " + r.stderr.strip())
    with open(sites_snap) as f:
        sites = json.load(f)
    r = run("view", sites_snap, sites_log, "-o", sites_page)
    sites_data = page_data(sites_page)[0] if r.returncode == 0 else {"snapshots": [{}]}
    got = sites_data["snapshots"][0]
    check(r.returncode == 0 and got.get("frames") == sites["frames"] and
          got.get("stacks") == sites["stacks"] and len(sites["stacks"]) == 2,
          "a snapshot's frames and stacks are in the page as the snapshot has them")
    # the track layer's blocks: (index in its blocks, the function that made it)
    sites_layer = [i for i, layer in enumerate(sites["layers"]) if layer["kind"] == "track"][0]
    sites_blocks = [(i, {4096: "stack_site_weights", 8192: "stack_site_activations"}[b["size"]])
                    for i, b in enumerate(sites["layers"][sites_layer]["blocks"])]

    # a tag below the 8 of highest peak with more events than such a tag's steps (12,500:
    # tools/cmd-view.c's MAX_STEPS / LEVEL_STEP): the page holds its two coarser levels, the
    # 8 others every step, each with its peak and events as the CSV sums them
    ranked = os.path.join(d, "ranked-tags.csv")
    with open(ranked, "w") as f:
        f.write(HEADER + ",Tag\n")
        t, i = 8 * 3600 * 10**6, 0
        for k in range(8):  # big%d: one allocation of 1 MiB + k, freed
            t += 3
            f.write("1,%s,allocate,0x%x,%d,0x0,big%d\n" % (clock(t), 0x10000000 + k * 2**21,
                                                           2**20 + k, k))
            f.write("1,%s,free,0x%x,%d,0x0,big%d\n" % (clock(t + 1), 0x10000000 + k * 2**21,
                                                       2**20 + k, k))
        for i in range(6600):  # small: 13,200 events of 64 bytes, one live at a time
            t += 3
            f.write("1,%s,allocate,0x%x,64,0x0,small\n" % (clock(t), 0x100000))
            f.write("1,%s,free,0x%x,64,0x0,small\n" % (clock(t + 1), 0x100000))
    ranked_series = expected(ranked)[0]
    r = run("view", ranked, "-o", os.path.join(d, "ranked.html"))
    rd = page_data(os.path.join(d, "ranked.html"))[0] if r.returncode == 0 else {"series": []}
    by_tag = {s["tag"]: s for s in rd["series"]}
    small = by_tag.get("small", {})
    check(r.returncode == 0 and small.get("steps", 0) is None and
          len(small.get("levels", [])) == 2 and
          [len(l["min"]) for l in small.get("levels", [])] == [1024, 8192] and
          all(by_tag["big%d" % k]["steps"] is not None for k in range(8)) and
          by_tag[None]["steps"] is not None and
          {k: [s["events"], s["peak"], s["final"]] for k, s in by_tag.items()} == ranked_series,
          "a tag ranked 9th by peak with 13,200 events: held as the two coarser levels, the 8 "
          "above it and the layer every step, peaks and events as the CSV sums them: %s" % (
              r.stderr.strip() or [len(l["min"]) for l in small.get("levels", [])]))

    # ---- in the browser
    skip = None if CHROMIUM else "no chromium (Debian's chromium package; MEMRES_CHROMIUM)"
    r = run("view", log, snap, "-o", page)
    if skip:
        for what in ("DOM", "screenshot", "console", "many tags", "many tags drawn", "large log",
                     "a snapshot block's stack"):
            check(True, "the browser: " + what, skip)
    else:
        profile = os.path.join(d, "profile")
        dom_text, console = browse("file://" + page, profile, "dom", 10000)
        dom = Dom(dom_text)
        st = dom.status
        check(st.get("data-drawn") == "1" and "data-errors" not in st,
              "the page drew its timeline without an error: %s" % st.get("data-errors"))
        check(st.get("data-series") == str(len(series)) and
              [(int(a["data-peak"]), int(a["data-events"])) for a in dom.legend] ==
              [(series[s["tag"]][1], series[s["tag"]][0]) for s in data["series"]],
              "the legend shows each series' peak and events, as the CSV sums them")
        check(st.get("data-segments-drawn") == str(n_segments) and
              st.get("data-blocks-drawn") == str(n_blocks),
              "segments and blocks drawn: %s and %s of %d and %d" % (
                  st.get("data-segments-drawn"), st.get("data-blocks-drawn"), n_segments,
                  n_blocks))
        summary = [t for t in dom.tables if t["class"] == "summary"]
        s = doc["summary"]
        check(summary and summary[0]["cells"][1:5] ==
              [str(s["reserved"]), str(s["used"]), str(s["cached"]), str(s["largest_free"])],
              "the snapshot's reserved, used, cached and largest free bytes shown")
        layers = [t for t in dom.tables if t["class"] == "layer"]
        check([c["cells"][5:7] for c in layers] ==
              [[str(len(l["segments"])), str(len(l["blocks"]))] for l in doc["layers"]],
              "each layer's count of segments and blocks shown")
        top = [t for t in dom.tables if t["id"] == "top-table"]
        check(top and top[0]["cells"][0] == str(largest), "the largest allocation shown first")
        check(st.get("data-marks") == str(len(marks)), "the marks: %s" % st.get("data-marks"))
        # chromium logs every console message (errors, uncaught exceptions among them) as
        # INFO:CONSOLE; the page writes none
        check(not console, "the console shows no message (no error): %s" % console)

        st_r = Dom(browse("file://" + res_page, profile, "dom", 10000)[0])
        check([(a.get("data-what"), int(a["data-peak"])) for a in st_r.legend] ==
              [("used", used_series[None][1]), ("reserved", res_series[None][1])] and
              st_r.status.get("data-drawn") == "1" and "data-errors" not in st_r.status,
              "the legend shows the used and the reserved series with their peaks")

        # the columns drawn: every step's least and most bytes in its column of pixels
        st_c = Dom(browse("file://" + page + "#columns", profile, "dom", 10000)[0]).status
        cols = json.loads(st_c.get("data-columns", "[null]"))[0]
        W = int(st_c.get("data-plot", "0,0,0,0").split(",")[2])
        T, V = layer_steps(log)
        wrong = columns_wrong(cols, T, V, W, 0, max(data["span"][1], 1), True) if cols else ["none"]
        check(not wrong, "the first view's columns are the log's least and most bytes in each, "
              "exactly (%d columns; wrong: %s)" % (W, wrong[:3]))

        # hover: a mouse move dispatched over the timeline; the tooltip names the largest
        # allocations live at the moment under the pointer with their size, stream, thread and
        # log line, as the CSV has them
        for frac in (0.3, 0.7):
            at = round(frac * data["span"][1])
            st_h = Dom(browse("file://%s#hover=%d" % (page, at), profile, "dom", 10000)[0]).status
            tip = html.unescape(st_h.get("data-tip", ""))
            t_h = float(st_h.get("data-hover-t", "-1"))
            live = live_at(log, t_h)
            line = [l for l in tip.split("\n") if l.startswith("largest live allocation: ")]
            want = [a for a in live if a[0] == live[0][0]] if live else []
            ok = bool(line) and any(
                line[0].startswith("largest live allocation: ") and
                ("(%d bytes) at %s" % (a[0], a[1])) in line[0] and
                ("stream %s, thread %s," % (a[2], a[3])) in tip and
                ("%s:%d)" % (log, a[4])) in tip for a in want)
            check(st_h.get("data-tip-shown") == "block" and abs(t_h - at) <= data["span"][1] / 500
                  and ok and "backtrace: none" in tip,
                  "the tooltip at %.0f us shows the largest live allocation, %s: %s" % (
                      t_h, want[:1], line[:1]))
        # hover over the log with backtraces at 45 us: the three largest live allocations
        # (0x300000, 0x100000, 0x500000), each with its frames, at most 8, innermost first
        st_b = Dom(browse("file://%s#hover=45" % bt_page, profile, "dom", 10000)[0])
        tip = html.unescape(st_b.status.get("data-tip", ""))
        want = []
        for frames, count in (BACKTRACES["0x300000"], BACKTRACES["0x100000"],
                              BACKTRACES["0x500000"]):
            want.append("  backtrace (%d frames, innermost first):" % count)
            want += ["    #%d %s" % (i, f) for i, f in enumerate(frames[:8])]
            if count > 8:
                want.append("    ... %d more (the table below: hover its backtrace cell)"
                            % (count - 8))
        got = [l for l in tip.split("\n") if l.startswith("  backtrace") or
               l.startswith("    ")]
        top_bt = [t for t in st_b.tables if t["id"] == "top-table"]
        check(got == want and abs(float(st_b.status.get("data-hover-t", "-1")) - 45) < 0.5 and
              "data-errors" not in st_b.status and top_bt and
              top_bt[0]["cells"][8] == STEP[0] and top_bt[0]["cells"][17] == LOAD[0],
              "the tooltip shows the largest live allocations' backtraces, the table their "
              "innermost frames: %s" % got[:4])
        st_o = Dom(browse("file://%s#hover=60" % bt_page, profile, "dom", 10000)[0]).status
        tip = html.unescape(st_o.get("data-tip", "")).split("\n")
        at = [i for i, l in enumerate(tip) if l.startswith("out of memory at ")]
        check(at and tip[at[0] + 1:at[0] + 4] == ["  backtrace (2 frames, innermost first):",
                                                  "    #0 " + STEP[0], "    #1 " + STEP[1]],
              "the tooltip over the out of memory shows the request's backtrace: %s" % (
                  tip[at[0]:at[0] + 4] if at else tip))
        # the segment map rebuilt from the log at a chosen moment: segments, blocks, holes and
        # the largest hole, against the fixed log
        for at, (n_seg, mapped, n_used, used, n_holes, hole, hole_at) in SEGMENT_MAPS.items():
            dom_s = Dom(browse("file://%s#choose=%d" % (seg_page, at), profile, "dom", 10000)[0])
            tb = [t for t in dom_s.tables if t["id"] == "map-at-table"]
            cells = tb[0]["cells"][1:7] if tb else []
            maps = [c for c in dom_s.segmaps if c.get("data-snapshot") == "t"]
            check(cells == [str(v) for v in (n_seg, mapped, n_used, used, n_holes, hole)] and
                  json.loads(html.unescape(dom_s.status.get("data-map-largest", "[]"))) ==
                  [[0, hole, hole_at]] and len(maps) == 1 and
                  maps[0].get("data-segments") == str(n_seg) and
                  maps[0].get("data-blocks") == str(n_used + n_holes) and
                  dom_s.status.get("data-sleeps") == "1" and
                  dom_s.status.get("data-wakes") == "1" and "data-errors" not in dom_s.status,
                  "the segment map at %d us: %s (largest hole at %s), drawn: %s" % (
                      at, cells, dom_s.status.get("data-map-largest"), maps))

        # hover over a snapshot's used block: its call stack, its function innermost
        for i, site in sites_blocks:
            b = sites["layers"][sites_layer]["blocks"][i]
            frames = [sites["frames"][k] for k in sites["stacks"][b["stack"]][1:]]
            st_k = Dom(browse("file://%s#block=0,%d,%d" % (sites_page, sites_layer, i), profile,
                              "dom", 10000)[0]).status
            tip = html.unescape(st_k.get("data-block-tip", "")).split("\n")
            want = ["used block at %s: " % b["address"],
                    "  backtrace (%d frames, innermost first):" % len(frames),
                    "    #0 " + frames[0][:160]]
            check(st_k.get("data-block-tip-shown") == "block" and len(tip) >= 4 and
                  tip[0].startswith(want[0]) and tip[2:4] == want[1:] and
                  ("(%s+0x" % site) in tip[3] and "data-errors" not in st_k,
                  "the tooltip over the snapshot's block of %d bytes shows its stack, %s() "
                  "innermost: %s" % (b["size"], site, tip[:4]))
        # a block of a snapshot without stacks: says so
        st_k = Dom(browse("file://%s#block=0,0,0" % page, profile, "dom", 10000)[0]).status
        tip = html.unescape(st_k.get("data-block-tip", ""))
        check(st_k.get("data-block-tip-shown") == "block" and
              "backtrace: none (the snapshot has none: track:backtrace=true records them)" in tip,
              "the tooltip over a snapshot's used block without a stack says so: %s" % tip)

        # the allocator shim's file (a snapshot per device): the page shows each device's
        shim = os.path.join(d, "shim.json")
        with open(shim, "w") as f:
            json.dump({"memres_allocator_snapshot": 1, "devices": {"0": doc, "1": doc}}, f)
        shim_page = os.path.join(d, "shim.html")
        r = run("view", shim, oom_snap, "-o", shim_page)
        dom2 = browse("file://" + shim_page, profile, "dom", 10000)[0] if r.returncode == 0 \
            else ""
        st2 = Dom(dom2).status
        check(st2.get("data-snapshots") == "3" and
              st2.get("data-blocks-drawn") == str(2 * n_blocks),
              "the allocator shim's snapshot file: a segment map per device (%s snapshots, %s "
              "blocks)" % (st2.get("data-snapshots"), st2.get("data-blocks-drawn")))
        check(st2.get("data-reports") == "1" and '<pre class="report">' in dom2 and
              html.escape(oom_doc.get("oom_report", "-"), quote=False)[:60] in dom2,
              "the out-of-memory snapshot's report shown")

        # the screenshot, in chosen regions
        shot = os.path.join(d, "shot.png")
        browse("file://" + page, profile, shot, 10000)
        ok = os.path.exists(shot)
        if ok:
            w, h, px = read_png(shot)
            cx, cy, cw, ch = map(int, st["data-timeline-rect"].split(","))
            pl, pt, pw, ph = map(int, st["data-plot"].split(","))
            oom = [m for m in data["marks"] if m[2] == "out of memory"][0]
            x = cx + 1 + pl + round(oom[1] / data["span"][1] * pw)
            column = [px[y][xx] for y in range(cy + 1 + pt + 10, cy + 1 + pt + ph - 2)
                      for xx in (x - 1, x, x + 1)]
            red = sum(1 for p in column if near(p, hexrgb("#d4380d")))
            check(red >= len(column) // 3, "the out-of-memory marker's column is red: %d of %d "
                  "pixels" % (red, len(column)))
            plot = [px[y][xx] for y in range(cy + 1 + pt, cy + 1 + pt + ph, 3)
                    for xx in range(cx + 1 + pl, cx + 1 + pl + pw, 3)]
            blue = sum(1 for p in plot if near(p, hexrgb("#2f6fde"), 50))
            check(blue > 100, "the used series' colour in the plot: %d pixels" % blue)
            seg = []
            for rc in st["data-segmap-rects"].split(";"):
                sx, sy, sw, sh = map(int, rc.split(","))
                seg += [px[y][xx] for y in range(sy, min(h, sy + sh)) for xx in range(sx, sx + sw, 2)]
            used = sum(1 for p in seg if near(p, hexrgb("#2f6fde")))
            free = sum(1 for p in seg if near(p, hexrgb("#8ce99a")))
            check(used > 50 and free > 5, "the segment map shows used (%d) and free (%d) blocks"
                  % (used, free))
        else:
            check(False, "chromium wrote the screenshot")

        # many tags (300 values of the Tag column, each 20 events): the page draws the layer
        # and the 8 tags of highest peak, lists every tag with the peak and events re-summed
        # from the CSV, and shows the count of tags
        many = os.path.join(d, "many-tags.csv")
        n_tags, n_allocs = 300, 3000
        with open(many, "w") as f:
            f.write(HEADER + ",Tag\n")
            t = 8 * 3600 * 10**6
            for i in range(n_allocs):
                t += 3
                k = i % n_tags  # tag k's allocations are 64 + 16 k bytes: its peak, one live
                f.write("1,%s,allocate,0x%x,%d,0x0,t%d\n" % (clock(t), 0x100000 + i * 8192,
                                                             64 + 16 * k, k))
                if i >= 16:
                    j = i - 16
                    f.write("1,%s,free,0x%x,%d,0x0,t%d\n" % (
                        clock(t + 1), 0x100000 + j * 8192, 64 + 16 * (j % n_tags), j % n_tags))
        many_series = expected(many)[0]
        many_page = os.path.join(d, "many-tags.html")
        r = run("view", many, "-o", many_page)
        many_data = page_data(many_page)[0] if r.returncode == 0 else {"series": []}
        many_dom = browse("file://" + many_page, profile, "dom", 20000)[0]
        dm = Dom(many_dom)
        shown = [(many_data["series"][int(a["data-series"])]["tag"], int(a["data-peak"]),
                  int(a["data-events"])) for a in dm.legend]
        check(r.returncode == 0 and dm.status.get("data-drawn") == "1" and
              "data-errors" not in dm.status and dm.status.get("data-tags") == str(n_tags) and
              "%d tags; the 8 with the highest peaks drawn" % n_tags in many_dom
              and sorted(shown, key=str) == sorted(((k, v[1], v[0]) for k, v in
                                                    many_series.items()), key=str),
              "a log of %d tags: the page draws, shows the count of tags, and its legend each "
              "tag's peak and events as the CSV sums them (%s tags, %d of %d entries)" % (
                  n_tags, dm.status.get("data-tags"), len(shown), len(many_series)))
        top8 = sorted((k for k in many_series if k is not None),
                      key=lambda k: -many_series[k][1])[:8]
        drawn = [many_data["series"][int(a["data-series"])]["tag"] for a in dm.legend
                 if "off" not in a.get("class", "").split()]
        check(dm.status.get("data-series-drawn") == "9" and sorted(drawn, key=str) ==
              sorted([None] + top8, key=str),
              "a log of %d tags: the layer and the 8 tags of highest peak drawn at first, the "
              "others listed off: %s drawn, %s" % (n_tags, dm.status.get("data-series-drawn"),
                                                   drawn))

        # a large log: the page's size and its first view
        n = max(int(os.environ.get("MEMRES_VIEW_EVENTS", "1000000")), 64)
        big = os.path.join(d, "big.csv")
        with open(big, "w") as f:
            f.write(HEADER + "\n")
            t, lines = 8 * 3600 * 10**6, []
            for i in range(n // 2):
                t += 3
                lines.append("1,%s,allocate,0x%x,%d,0x0\n" % (clock(t), 0x100000 + i * 64,
                                                              64 + (i * 7919) % 4096))
                if i >= 16:
                    j = i - 16 + (i % 3)
                    lines.append("1,%s,free,0x%x,%d,0x0\n" % (clock(t + 1), 0x100000 + j * 64,
                                                             64 + (j * 7919) % 4096))
                if len(lines) > 100000:
                    f.write("".join(lines))
                    lines = []
            f.write("".join(lines))
        big_series, _, _ = expected(big)
        bigpage = os.path.join(d, "big.html")
        t0 = time.monotonic()
        r = run("view", big, "-o", bigpage)
        took = time.monotonic() - t0
        size = os.path.getsize(bigpage) if r.returncode == 0 else -1
        data3 = page_data(bigpage)[0] if r.returncode == 0 else {"series": [{}], "span": [0, 1]}
        # up to MAX_STEPS events (tools/cmd-view.c) the page holds every step and no levels,
        # past it the levels alone: MEMRES_VIEW_EVENTS on either side of the limit
        s3 = data3["series"][0]
        exact = big_series[None][0] <= VIEW_MAX_STEPS
        T, V = layer_steps(big)
        held = (s3.get("steps") == {"t": T, "v": V} and s3.get("levels") == []) if exact else \
            (s3.get("steps") is None and len(s3.get("levels", [])) == 3)
        check(r.returncode == 0 and 0 < size <= 64 * 2**20 and s3.get("peak") ==
              big_series[None][1] and s3.get("events") == big_series[None][0] and held,
              "a log of %d events: a page of %d bytes (at most 64 MiB) in %.1f s, peak %d, %s" % (
                  big_series[None][0], size, took, big_series[None][1],
                  "every step" if exact else "buckets at three resolutions"))
        dom_text, console = browse("file://" + bigpage + "#zoom", profile, "dom", 60000)
        st = Dom(dom_text).status
        st_c = Dom(browse("file://" + bigpage + "#columns", profile, "dom", 60000)[0]).status
        cols = json.loads(st_c.get("data-columns", "[null]"))[0]
        W = int(st_c.get("data-plot", "0,0,0,0").split(",")[2])
        # the page draws from the steps where it holds them and a view shows at most
        # STEPS_PER_COLUMN (view-page.html) of them a column, else from buckets
        b = max(data3["span"][1], 1)
        exact = exact and bisect.bisect_left(T, b) - (bisect.bisect_left(T, 1) - 1) <= 4 * W
        wrong = columns_wrong(cols, T, V, W, 0, b, exact) if cols else ["none"]
        check(not wrong, "the large page's columns, drawn from %s, hold the log's least and "
              "most bytes of each column%s (wrong: %s)" % (
                  "its steps" if exact else "buckets",
                  "" if exact else " and no value from further than two columns away",
                  wrong[:3]))
        check(st.get("data-drawn") == "1" and "data-errors" not in st and "data-zoom-ms" in st,
              "the large page drew its timeline and zoomed: first view at %s ms, slowest zoom "
              "%s ms (the issue's targets: 3 s and 100 ms, measured, not asserted here)" % (
                  st.get("data-first-view-ms"), st.get("data-zoom-ms")))

print("1..%d" % len(tests))
for i, (ok, what, skip) in enumerate(tests, 1):
    what = what.replace("\n", " ")
    if skip:
        print("ok %d - %s # SKIP %s" % (i, what, skip))
    else:
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
