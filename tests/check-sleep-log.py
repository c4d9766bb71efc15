#!/usr/bin/env python3
# memres - CUDA memory resources
# check-sleep-log.py: sleep and wake under a `log` layer, on the fake driver (suite fake). The
# fixed run of tests/sleep-log.c (log:tags=true,segments=true>vmm: "kv" 2 + 4 MiB put to sleep
# with the backup policy and woken, "w" 2 MiB put to sleep (discard) and woken) writes a CSV log;
# its rows are asserted (the sleep and wake lines: the bytes, policy and tag; the segment lines:
# each buffer unmapped at its sleep and mapped again at its wake); `memres trace` of it is read
# back with Python's json module, its instant events counted and their args checked, its mapped
# bytes re-summed; `memres replay` accepts the log (the sleep, wake and segment lines read, not
# replayed); `memres view` puts the sleeps and wakes among its marks. TAP output.
# Usage: check-sleep-log.py MEMRES SLEEP-LOG
import csv
import json
import os
import re
import subprocess
import sys
import tempfile

memres, sleep_log = sys.argv[1], sys.argv[2]
MIB = 1024 * 1024
tests = []


def check(ok, what):
    tests.append((ok, what))


with tempfile.TemporaryDirectory() as tmp:
    log = os.path.join(tmp, "sleep.csv")
    r = subprocess.run([sleep_log, log], capture_output=True, text=True)
    check(r.returncode == 0, "the run sleeps and wakes under log: " + r.stderr.strip())
    with open(log) as f:
        header = f.readline().rstrip("\n")
        rows = [row for row in csv.reader(f) if row]
    check(header == "Thread,Time,Action,Pointer,Size,Stream,Tag", "the header has the Tag column")
    actions = [row[2] for row in rows]
    check(actions.count("allocate") == 3 and actions.count("free") == 3, "3 allocates, 3 frees")
    sleeps = [row for row in rows if row[2].startswith("sleep ") or row[2].startswith("wake ")]
    check([(row[2], int(row[4]), row[6], row[3], row[5]) for row in sleeps] == [
        ("sleep backup", 6 * MIB, "kv", "0x0", "0x0"), ("wake backup", 6 * MIB, "kv", "0x0", "0x0"),
        ("sleep discard", 2 * MIB, "w", "0x0", "0x0"), ("wake discard", 2 * MIB, "w", "0x0", "0x0")],
        "the sleep and wake lines: policy, bytes, tag: %r" % sleeps)
    # vmm: a segment per buffer, mapped at its allocate, unmapped at its sleep, mapped again at
    # its wake, unmapped at its free
    mapped = [row for row in rows if row[2] == "segment mapped"]
    unmapped = [row for row in rows if row[2] == "segment unmapping"]
    check(len(mapped) == 3 + 3 and len(unmapped) == 3 + 3,
          "segment lines: 6 mapped, 6 unmapping (%d, %d)" % (len(mapped), len(unmapped)))
    allocated = {row[3]: int(row[4]) for row in rows if row[2] == "allocate"}
    check(sorted(allocated.values()) == [2 * MIB, 2 * MIB, 4 * MIB], "the buffers' sizes")
    i_sleep = actions.index("sleep backup")
    before = [row for row in rows[:i_sleep] if row[2] == "segment unmapping"]
    kv = sorted(row[3] for row in rows if row[2] == "allocate" and row[6] == "kv")
    check(sorted(row[3] for row in before) == kv,
          "the kv segments are unmapped before the sleep line, at their buffers' addresses")
    live, peak = {}, 0
    for row in rows:
        if row[2] == "segment mapped":
            live[row[3]] = int(row[4])
        elif row[2] == "segment unmapping":
            live.pop(row[3])
        peak = max(peak, sum(live.values()))
    check(live == {} and peak == 8 * MIB, "mapped bytes re-summed: peak 8 MiB, 0 at the end")

    # the trace
    r = subprocess.run([memres, "trace", log], capture_output=True, text=True)
    check(r.returncode == 0, "memres trace: " + r.stderr.strip())
    try:
        doc = json.loads(r.stdout)
    except ValueError as e:
        doc = {"traceEvents": []}
        check(False, "the trace is JSON: %s" % e)
    events = doc["traceEvents"]
    instants = [e for e in events if e.get("ph") == "i"]
    check(len(instants) == 4, "4 instant events (%d)" % len(instants))
    check([(e["name"], e["args"]["size"], e["args"]["policy"], e["args"]["tag"]) for e in instants] == [
        ("sleep backup", 6 * MIB, "backup", "kv"), ("wake backup", 6 * MIB, "backup", "kv"),
        ("sleep discard", 2 * MIB, "discard", "w"), ("wake discard", 2 * MIB, "discard", "w")],
        "the instants' names and args")
    check(all(e["s"] == "t" and isinstance(e["ts"], int) for e in instants), "thread-scoped, timed")
    counter = [e["args"]["mapped"] for e in events if e.get("name") == "mapped bytes"]
    check(len(counter) == 12 and max(counter) == 8 * MIB and counter[-1] == 0,
          "the mapped bytes counter: 12 samples, peak 8 MiB, 0 at the end")
    used = [e["args"]["used"] for e in events if e.get("name") == "used bytes"]
    check(max(used) == 8 * MIB and used[-1] == 0, "the used bytes counter")

    # replay accepts the log: 3 allocations, 3 frees, nothing failed
    r = subprocess.run([memres, "replay", "--json", log, "host"], capture_output=True, text=True)
    check(r.returncode == 0, "memres replay accepts the log: " + r.stderr.strip())
    m = re.search(r'"allocations": (\d+)', r.stdout)
    check(m is not None and int(m.group(1)) == 3, "replay: 3 allocations")
    m = re.search(r'"failures": (\d+)', r.stdout)
    check(m is not None and int(m.group(1)) == 0, "replay: no failure")

    # the page's marks
    page = os.path.join(tmp, "page.html")
    r = subprocess.run([memres, "view", log, "-o", page], capture_output=True, text=True)
    check(r.returncode == 0, "memres view: " + r.stderr.strip())
    with open(page) as f:
        text = f.read()
    m = re.search(r'<script id="memres-data" type="application/json">(.*?)</script>', text, re.S)
    data = json.loads(m.group(1)) if m else {"marks": [], "map": {"segments": []}}
    check([(mk[2], mk[3], mk[6]) for mk in data["marks"]] == [
        ("sleep backup", 6 * MIB, "kv"), ("wake backup", 6 * MIB, "kv"),
        ("sleep discard", 2 * MIB, "w"), ("wake discard", 2 * MIB, "w")], "the page's marks")
    check(len(data["map"]["segments"]) == 12 and len(data["map"]["allocs"]) == 3,
          "the page's segment lines and allocations")

print("1..%d" % len(tests))
for i, (ok, what) in enumerate(tests, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, what.replace("\n", " ")))
sys.exit(0 if all(ok for ok, _ in tests) else 1)
