#!/usr/bin/env python3
# memres - CUDA memory resources
# check-trace.py: `memres trace` read back with Python's json module. Two logs: one written by
# hand (two threads, memres's actions out of memory and trim, a time past midnight) and one the
# log adaptor wrote while `memres replay` replayed the first against a limit (so its failures
# are real). The trace's counter tracks are re-summed from each CSV: the used bytes and live
# buffers after every allocate and free, in order, their peaks; its instant events are counted
# per action. TAP output. Usage: check-trace.py MEMRES
import json
import os
import subprocess
import sys
import tempfile

memres = sys.argv[1]
tests = []


def check(ok, what):
    tests.append((ok, what))


def expected(path):
    """The used bytes and live buffers after each allocate and free, and the instants, from a
    CSV log."""
    live, used, counters, instants = {}, 0, [], {}
    with open(path) as f:
        assert f.readline().strip() == "Thread,Time,Action,Pointer,Size,Stream"
        for line in f:
            if not line.strip():
                continue
            thread, time, action, pointer, size, stream = line.strip().split(",")
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

    # errors: a bad Time names FILE:LINE (exit status 2), a missing LOG, no LOG at all
    with open(hand, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n1,t,allocate,0x10,1,0x0\n")
    r = subprocess.run([memres, "trace", hand], capture_output=True, text=True)
    check(r.returncode == 2 and (hand + ":2: invalid Time") in r.stderr, "a bad Time: " + r.stderr)
    r = subprocess.run([memres, "trace", os.path.join(d, "none.csv")], capture_output=True,
                       text=True)
    check(r.returncode == 2 and "not a regular file" in r.stderr, "a missing LOG")
    r = subprocess.run([memres, "trace"], capture_output=True, text=True)
    check(r.returncode == 2 and "expected LOG..." in r.stderr, "no LOG")

print("1..%d" % len(tests))
for i, (ok, what) in enumerate(tests, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
sys.exit(0 if all(ok for ok, _ in tests) else 1)
