#!/usr/bin/env python3
# memres - CUDA memory resources
# check-trace.py: `memres trace` read back with Python's json module. Logs with the Tag column
# (the log adaptor's tags=true, and one by hand) give a counter track per tag, re-summed. Two logs: one written by
# hand (two threads, memres's actions out of memory and trim, a time past midnight) and one the
# log adaptor wrote while `memres replay` replayed the first against a limit (so its failures
# are real). The trace's counter tracks are re-summed from each CSV: the used bytes and live
# buffers after every allocate and free, in order, their peaks; its instant events are counted
# per action. The call stacks of a log with the Backtrace column (log:backtrace=true, written by
# tests/stack-sites.c, whose allocations are made in functions of known names): each allocate,
# allocate failure and out of memory names its stack ("sf") in the document's stackFrames, which
# holds each frame once under its parent; a malformed Backtrace field is refused naming LOG:LINE
# (MEMRES_ERROR_INVALID_ARGUMENT). TAP output. Usage: check-trace.py MEMRES STACK_SITES
import csv
import json
import os
import subprocess
import sys
import tempfile

memres = sys.argv[1]
stack_sites = sys.argv[2]
tests = []


def check(ok, what):
    tests.append((ok, what))


def expected_tags(path):
    """Per tag ("" the untagged) the bytes live under it after each allocate and free of it, from
    a CSV log with the Tag column (the last field: quoted by the log adaptor where it holds a
    comma or a quote, as Python's csv module reads it; or, as older logs and the hand log below
    write it, the rest of the line)."""
    live, used, series = {}, {}, {}
    with open(path, newline="") as f:
        assert f.readline().strip() == "Thread,Time,Action,Pointer,Size,Stream,Tag"
        for row in csv.reader(f):
            if not row:
                continue
            thread, time, action, pointer, size, stream = row[:6]
            tag = ",".join(row[6:])
            if action == "allocate":
                live[pointer] = (int(size), tag)
                used[tag] = used.get(tag, 0) + int(size)
            elif action == "free" and pointer in live:
                size, tag = live.pop(pointer)
                used[tag] -= size
            else:
                continue
            series.setdefault(tag, []).append(used[tag])
    return series


def expected(path):
    """The used bytes and live buffers after each allocate and free, and the instants, from a
    CSV log."""
    live, used, counters, instants = {}, 0, [], {}
    with open(path) as f:
        tagged = f.readline().strip() == "Thread,Time,Action,Pointer,Size,Stream,Tag"
        for row in csv.reader(f):
            if not row:
                continue
            thread, time, action, pointer, size, stream = row[:6]
            if action == "allocate":
                live[pointer] = int(size)
                used += int(size)
            elif action == "free":
                if pointer not in live:
                    continue
                used -= live.pop(pointer)
            else:
                instants.setdefault(action, []).append(int(size))
                continue
            counters.append((used, len(live)))
    return counters, instants


with tempfile.TemporaryDirectory() as d:
    hand = os.path.join(d, "hand.csv")
    real = os.path.join(d, "real.csv")
    out = os.path.join(d, "trace.json")
    lines = ["Thread,Time,Action,Pointer,Size,Stream"]
    t = 23 * 3600 * 10**6 + 59 * 60 * 10**6 + 59 * 10**6  # a second before midnight
    for i in range(40):
        t += 50000
        ts = "%02d:%02d:%02d.%06d" % ((t // 3600000000) % 24, t // 60000000 % 60,
                                      t // 1000000 % 60, t % 1000000)
        thread = 100 + i % 2
        if i % 3 == 2:
            lines.append("%d,%s,free,0x%x,%d,0x0" % (thread, ts, 0x1000 * (i - 1), 1000 + i - 1))
        else:
            lines.append("%d,%s,allocate,0x%x,%d,0x0" % (thread, ts, 0x1000 * i, 1000 + i))
        if i == 20:
            lines.append("%d,%s,allocate failure,0x0,999999,0x0" % (thread, ts))
            lines.append("%d,%s,out of memory,0x0,999999,0x0" % (thread, ts))
        if i == 30:
            lines.append("%d,%s,trim,0x0,0,0x0" % (thread, ts))
    with open(hand, "w") as f:
        f.write("\n".join(lines) + "\n")
    hand_counters, hand_instants = expected(hand)
    peak = max(u for u, _ in hand_counters)

    # the log adaptor's own log, of a replay that a limit below the peak makes fail
    r = subprocess.run([memres, "replay", hand, "log:path=%s>limit:max=%d>host" % (real, peak - 1)],
                       capture_output=True, text=True)
    check(r.returncode == 1 and ":" in r.stderr, "replay under a limit fails, naming its line")
    real_counters, real_instants = expected(real)
    check("out of memory" in real_instants, "the log adaptor logged an out of memory")

    r = subprocess.run([memres, "trace", hand, real, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout == "" and r.stderr == "", "memres trace succeeds")
    with open(out) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    check(names == {1: hand, 2: real}, "a process per log, named by its path")
    for pid, counters, instants in ((1, hand_counters, hand_instants),
                                    (2, real_counters, real_instants)):
        mine = [e for e in events if e["pid"] == pid]
        used = [e["args"]["used"] for e in mine if e["ph"] == "C" and e["name"] == "used bytes"]
        bufs = [e["args"]["live"] for e in mine if e["ph"] == "C" and e["name"] == "buffers"]
        check(used == [u for u, _ in counters], "pid %d: used bytes re-summed from the CSV" % pid)
        check(bufs == [b for _, b in counters], "pid %d: live buffers re-summed" % pid)
        check(max(used) == max(u for u, _ in counters), "pid %d: the peak" % pid)
        got = {}
        for e in mine:
            if e["ph"] == "i":
                got.setdefault(e["name"], []).append(e["args"]["size"])
        check(got == instants, "pid %d: instant events per action: %s" % (pid, sorted(got)))
    ts = [e["ts"] for e in events if e["ph"] != "M"]
    check(ts == sorted(ts) and ts[0] == 0, "times from 0, in order")
    hand_ts = [e["ts"] for e in events if e["pid"] == 1 and e["ph"] == "C"]
    check(hand_ts[-1] - hand_ts[0] > 0, "the hand log's times go on past midnight")

    # the Tag column: the log adaptor's own (tags=true), of allocations under tags (one with a
    # comma in its name), and a log written by hand with three tags; a track per tag
    tagged = os.path.join(d, "tagged.csv")
    for tag, size in (("weights", "1MiB"), ("a,b", "4KiB"), (None, "64KiB"), ("weights", "8KiB")):
        r = subprocess.run([memres, "alloc"] + (["-t", tag] if tag else []) +
                           ["log:path=%s,tags=true,append=true>host" % tagged, size],
                           capture_output=True, text=True)
        check(r.returncode == 0, "memres alloc under tag %s through log:tags=true: %s" % (
            tag, r.stderr.strip()))
    with open(tagged) as f:
        rows = list(csv.reader(f))[1:]
    check([(r[2], r[6]) for r in rows] ==
          [(a, t) for t in ("weights", "a,b", "", "weights") for a in ("allocate", "free")],
          "the log adaptor writes each buffer's tag on its allocate and free, quoted where it "
          "holds a comma, as Python's csv module reads it: %s" % rows)
    hand_tagged = os.path.join(d, "hand-tagged.csv")
    with open(hand) as f:
        hl = f.read().splitlines()
    with open(hand_tagged, "w") as f:
        f.write(hl[0] + ",Tag\n")
        for i, line in enumerate(hl[1:]):
            pointer = int(line.split(",")[3], 16)
            f.write(line + "," + ("", "x", "y,z")[(pointer // 0x1000) % 3] + "\n")
    r = subprocess.run([memres, "trace", tagged, hand_tagged, "-o", out], capture_output=True,
                       text=True)
    check(r.returncode == 0, "memres trace of tagged logs: " + r.stderr.strip())
    with open(out) as f:
        events = json.load(f)["traceEvents"]
    for pid, path in ((1, tagged), (2, hand_tagged)):
        want = expected_tags(path)
        got = {}
        for e in events:
            if e["pid"] == pid and e["ph"] == "C" and e["name"].startswith("used bytes, "):
                n = e["name"][len("used bytes, "):]
                got.setdefault("" if n == "untagged" else n[len("tag "):], []).append(
                    e["args"]["used"])
        check(got == want, "pid %d: a counter track per tag, re-summed from the CSV: %s" % (
            pid, sorted(got)))
        layer = [e["args"]["used"] for e in events
                 if e["pid"] == pid and e["ph"] == "C" and e["name"] == "used bytes"]
        check(layer == [u for u, _ in expected(path)[0]], "pid %d: the layer's track as before"
              % pid)

    # the failures of a log with the Tag column: each instant names the tag of the request that
    # failed (an allocate failure and its out of memory) or of the buffer whose free failed; a
    # log without the column gives no tag
    fails = os.path.join(d, "tagged-failures.csv")
    with open(fails, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream,Tag\n"
                "7,10:00:00.000001,allocate,0x1000,4096,0x0,weights\n"
                "7,10:00:00.000002,allocate failure,0x0,1048576,0x0,act,x\n"
                "7,10:00:00.000003,out of memory,0x0,1048576,0x0,act,x\n"
                "7,10:00:00.000004,free failure,0x1000,4096,0x0,weights\n"
                "7,10:00:00.000005,allocate failure,0x0,64,0x0,\n"
                "7,10:00:00.000006,free,0x1000,4096,0x0,weights\n")
    r = subprocess.run([memres, "trace", fails, hand, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "memres trace of a tagged log with failures: " + r.stderr.strip())
    with open(out) as f:
        events = json.load(f)["traceEvents"]
    got = [(e["name"], e["args"]["size"], e["args"].get("tag")) for e in events
           if e["pid"] == 1 and e["ph"] == "i"]
    check(got == [("allocate failure", 1048576, "act,x"), ("out of memory", 1048576, "act,x"),
                  ("free failure", 4096, "weights"), ("allocate failure", 64, "")],
          "the failures' instants carry the tag of the Tag column: %s" % got)
    check(all("tag" not in e["args"] for e in events if e["pid"] == 2 and e["ph"] == "i"),
          "a log without the Tag column: no tag in its instants")

    # a Time that goes back by less than 12 hours (two threads' lines: each Time is taken before
    # the lock that orders the lines, so a line may carry an earlier Time than the one before
    # it): the line keeps its place, at the Time of the line before it; the counters keep the
    # log's order and end where the log ends (they ended at 4096 bytes, the free drawn first)
    back = os.path.join(d, "time-back.csv")
    with open(back, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n"
                "7,10:00:00.000010,allocate,0x1000,4096,0x0\n"
                "8,10:00:00.000008,free,0x1000,4096,0x0\n"
                "7,10:00:00.000009,allocate,0x1000,64,0x0\n"
                "7,10:00:00.000020,free,0x1000,64,0x0\n")
    r = subprocess.run([memres, "trace", back, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "memres trace of a log whose Time goes back: " + r.stderr.strip())
    with open(out) as f:
        events = json.load(f)["traceEvents"]
    got = [(e["ts"], e["args"]["used"]) for e in events if e.get("name") == "used bytes"]
    check(got == [(0, 4096), (0, 0), (0, 64), (10, 0)],
          "a line whose Time goes back keeps its place at the time before it: %s" % got)

    # the call stacks: tests/stack-sites.c's log (log:backtrace=true); each allocate, allocate
    # failure and out of memory names its stack by its innermost frame's id (sf)
    sites_log = os.path.join(d, "sites.csv")
    r = subprocess.run([stack_sites, sites_log, os.path.join(d, "sites.json")],
                       capture_output=True, text=True)
    check(r.returncode == 0, "stack-sites runs: " + r.stderr.strip())
    r = subprocess.run([memres, "trace", sites_log, hand, "-o", out], capture_output=True,
                       text=True)
    check(r.returncode == 0, "memres trace of a log with the Backtrace column: " + r.stderr.strip())
    with open(out) as f:
        doc = json.load(f)
    frames = doc.get("stackFrames", {})

    def stack(sf):
        names, seen = [], set()
        key = str(sf)
        while key is not None and key in frames and key not in seen:
            seen.add(key)
            names.append(frames[key]["name"])
            key = frames[key].get("parent")
        return names if key is None else None  # None: a parent that is missing, or a cycle

    with open(sites_log) as f:
        rows = [l.rstrip("\n").split(",") for l in f][1:]
    logged = {}  # (action, size) -> the frames as logged (none of the fixed run's has %XX)
    for row in rows:
        if row[6]:
            logged[(row[2], int(row[4]))] = row[6].split(";")
    instants = [e for e in doc["traceEvents"] if e["pid"] == 1 and e["ph"] == "i"]
    want = {("allocate", 4096): "stack_site_weights", ("allocate", 8192): "stack_site_activations",
            ("allocate failure", 1048576): "stack_site_too_big",
            ("out of memory", 1048576): "stack_site_too_big"}
    got = {}
    for e in instants:
        got[(e["name"], e["args"]["size"])] = stack(e["sf"]) if "sf" in e else None
    check(sorted(got) == sorted(want), "an instant per allocate, allocate failure and out of "
          "memory of the log: %s" % sorted(got))
    for (action, size), site in sorted(want.items()):
        frames_of = got.get((action, size))
        check(frames_of is not None and len(frames_of) >= 3
              and ("(%s+0x" % site) in frames_of[0]
              and all(("(%s+0x" % other) not in f for f in frames_of
                      for other in set(want.values()) - {site}),
              "%s of %d: its innermost frame is %s(), and no other site's: %s" % (
                  action, size, site, frames_of and frames_of[:2]))
        check(frames_of == logged.get((action, size)),
              "%s of %d: the stack's frames, innermost first, are the Backtrace as logged" % (
                  action, size))
    allocs = [e for e in instants if e["name"] == "allocate"]
    check(all(e["args"]["pointer"].startswith("0x") for e in allocs) and len(allocs) == 2,
          "the allocate instants carry the Pointer")
    nodes = [(v["name"], v.get("parent")) for v in frames.values()]
    check(len(nodes) == len(set(nodes)) and len(frames) > 0,
          "each frame once under its parent: %d frames" % len(frames))
    outer = [k for k, v in frames.items() if "parent" not in v]
    check(len(outer) == 1, "the stacks share their outer frames (one root): %s" % outer)
    check(got.get(("allocate failure", 1048576)) == got.get(("out of memory", 1048576))
          and [e["sf"] for e in instants if e["name"] != "allocate"][0]
          == [e["sf"] for e in instants if e["name"] != "allocate"][1],
          "the failure and its out of memory: the same stack, the same sf")
    check(all("sf" not in e for e in doc["traceEvents"] if e["pid"] == 2),
          "a log without the column: no stacks")
    used = [e["args"]["used"] for e in doc["traceEvents"]
            if e["pid"] == 1 and e["ph"] == "C" and e["name"] == "used bytes"]
    check(used == [4096, 12288, 4096, 0], "the counters as before: %s" % used)

    # a malformed Backtrace field: refused naming LOG:LINE, MEMRES_ERROR_INVALID_ARGUMENT (the
    # check the log's reader shares with memres view), nothing written
    for field, why in (("a;;b", "frame 2 is empty"), ("a%2", "not followed by two hex digits"),
                       ("a%00b", "not followed by two hex digits"),
                       (";".join(["f"] * 65), "more than 64 frames")):
        bad = os.path.join(d, "bad-backtrace.csv")
        with open(bad, "w") as f:
            f.write("Thread,Time,Action,Pointer,Size,Stream,Backtrace\n"
                    "1,10:00:00.000000,allocate,0x10,16,0x0,main\n"
                    "1,10:00:00.000001,allocate,0x20,16,0x0,%s\n" % field)
        if os.path.exists(out):
            os.unlink(out)
        r = subprocess.run([memres, "trace", "--json", bad, "-o", out], capture_output=True,
                           text=True)
        try:
            err = json.loads(r.stdout)["error"]
        except (ValueError, KeyError, TypeError):
            err = {}
        check(r.returncode == 2 and (bad + ":3: invalid Backtrace") in r.stderr
              and why in r.stderr and err.get("domain") == "memres-error-quark"
              and err.get("code_name") == "MEMRES_ERROR_INVALID_ARGUMENT"
              and not os.path.exists(out),
              "a Backtrace %r: INVALID_ARGUMENT naming LOG:3 (%s): %s %s" % (
                  field[:12], why, r.stderr.strip()[:200], err))

    # errors: a bad Time names FILE:LINE (exit status 2), a missing LOG, no LOG at all
    with open(hand, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n1,t,allocate,0x10,1,0x0\n")
    r = subprocess.run([memres, "trace", hand], capture_output=True, text=True)
    check(r.returncode == 2 and (hand + ":2: invalid Time") in r.stderr, "a bad Time: " + r.stderr)
    r = subprocess.run([memres, "trace", os.path.join(d, "none.csv")], capture_output=True,
                       text=True)
    check(r.returncode == 2 and "none.csv: No such file" in r.stderr, "a missing LOG is named "
          "as missing: " + r.stderr.strip())
    r = subprocess.run([memres, "trace"], capture_output=True, text=True)
    check(r.returncode == 2 and "expected LOG..." in r.stderr, "no LOG")

print("1..%d" % len(tests))
for i, (ok, what) in enumerate(tests, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
sys.exit(0 if all(ok for ok, _ in tests) else 1)
