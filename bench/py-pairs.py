#!/usr/bin/env python3
"""The Python package's own allocate+close pair, without peers: ns per pair for each way a
Python program ends a buffer, and the instructions one pair costs (callgrind).

Forms (each a loop of `pairs` with the allocate method bound to a local first):
  close     b = allocate(4096); b.close()
  with      with allocate(4096): pass
  refcount  allocate(4096)                  (the buffer dies by reference count)
  stream    allocate(4096, s).close()       (bench/peers.py's memres-py loop; s an int handle)

Modes:
  py-pairs.py [--spec SPEC] [--size N]
      ns per pair of each form: a timeit-style loop, the median of R interleaved repetitions
  py-pairs.py --compare BASE NEW [--rounds 8]
      BASE and NEW are directories holding a memres package (build/python, or a copy of an
      older build's): each runs in short processes taking turns, and each row gives the
      median over rounds of the paired ratio NEW / BASE (a CPU that changes speed moves both)
  py-pairs.py --count N --form FORM
      N pairs of FORM and nothing else timed: run under valgrind --tool=callgrind at two N and
      divide the difference of the totals by the difference of N for instructions per pair
      (--callgrind does exactly that)
  py-pairs.py --callgrind [--python-path DIR]
      the instructions per pair of each form, through valgrind

Runs with the environment `meson devenv -C build` gives (MEMRES_PLUGIN_PATH; PYTHONPATH or
--python-path); MEMRES_CUDA_DRIVER picks the driver (the fake's library for `cache>dmr` here).
"""

import argparse
import gc
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

FORMS = ["close", "with", "refcount", "stream"]


def loop(form, allocate, size, n):
    """n pairs of form; returns the nanoseconds they took."""
    r = range(n)
    if form == "close":
        t0 = time.perf_counter_ns()
        for _ in r:
            b = allocate(size)
            b.close()
    elif form == "with":
        t0 = time.perf_counter_ns()
        for _ in r:
            with allocate(size):
                pass
    elif form == "refcount":
        t0 = time.perf_counter_ns()
        for _ in r:
            allocate(size)
    elif form == "stream":
        s = 0
        t0 = time.perf_counter_ns()
        for _ in r:
            allocate(size, s).close()
    else:
        raise SystemExit("unknown form %s" % form)
    return time.perf_counter_ns() - t0


def empty_loop(n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    return time.perf_counter_ns() - t0


def import_memres(path):
    if path:
        sys.path.insert(0, path)
    import memres

    return memres


def measure(args):
    memres = import_memres(args.python_path)
    mr = memres.Resource(args.spec)
    allocate = mr.allocate
    n = args.iterations
    for form in FORMS:
        loop(form, allocate, args.size, n // 10)  # warm the free lists and the cache
    samples = {form: [] for form in FORMS}
    gc.disable()
    for r in range(args.repetitions):
        for form in FORMS[r % len(FORMS):] + FORMS[:r % len(FORMS)]:
            samples[form].append(loop(form, allocate, args.size, n) / n)
    gc.enable()
    floor = statistics.median(empty_loop(n) / n for _ in range(5))
    return {"spec": args.spec, "size": args.size, "iterations": n, "loop_ns": floor,
            "ns": {f: statistics.median(s) for f, s in samples.items()}}


def run_self(python_path, extra):
    cmd = [sys.executable, os.path.abspath(__file__), "--json", "--python-path", python_path]
    out = subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def compare(args):
    base, new = args.compare
    extra = ["--spec", args.spec, "--size", str(args.size), "--repetitions",
             str(args.repetitions), "--iterations", str(args.iterations)]
    ratios = {f: [] for f in FORMS}
    ns = {"base": {f: [] for f in FORMS}, "new": {f: [] for f in FORMS}}
    for r in range(args.rounds):
        order = [("base", base), ("new", new)] if r % 2 == 0 else [("new", new), ("base", base)]
        got = {}
        for name, path in order:
            got[name] = run_self(path, extra)["ns"]
        for f in FORMS:
            ratios[f].append(got["new"][f] / got["base"][f])
            ns["base"][f].append(got["base"][f])
            ns["new"][f].append(got["new"][f])
    rows = {}
    for f in FORMS:
        rs = sorted(ratios[f])
        rows[f] = {"base_ns": statistics.median(ns["base"][f]),
                   "new_ns": statistics.median(ns["new"][f]),
                   "ratio": statistics.median(rs), "ratio_min": rs[0], "ratio_max": rs[-1]}
    return {"spec": args.spec, "size": args.size, "rounds": args.rounds, "rows": rows}


def callgrind_total(python_path, form, count, spec, size):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
               sys.executable, os.path.abspath(__file__), "--count", str(count), "--form", form,
               "--spec", spec, "--size", str(size)]
        if python_path:
            cmd += ["--python-path", python_path]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(out) as f:
            for line in f:
                m = re.match(r"(summary|totals):\s+(\d+)", line)
                if m:
                    return int(m.group(2))
    raise SystemExit("no totals in callgrind's output")


def callgrind(args):
    paths = args.compare or [args.python_path]
    lo, hi = 2000, 12000
    result = {}
    for path in paths:
        per = {}
        for form in FORMS:
            a = callgrind_total(path, form, lo, args.spec, args.size)
            b = callgrind_total(path, form, hi, args.spec, args.size)
            per[form] = (b - a) / (hi - lo)
        result[path or "default"] = per
    return {"spec": args.spec, "size": args.size, "instructions_per_pair": result}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", default="cache>host")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--python-path")
    p.add_argument("--repetitions", type=int, default=9)
    p.add_argument("--iterations", type=int, default=200000)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--compare", nargs=2, metavar=("BASE", "NEW"))
    p.add_argument("--count", type=int)
    p.add_argument("--form", choices=FORMS)
    p.add_argument("--callgrind", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    if args.count is not None:
        memres = import_memres(args.python_path)
        allocate = memres.Resource(args.spec).allocate
        loop(args.form, allocate, args.size, args.count)
        return 0
    if args.callgrind:
        out = callgrind(args)
    elif args.compare:
        out = compare(args)
    else:
        out = measure(args)
    if args.json:
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0
    if "rows" in out:
        print("%s, %d B, %d rounds: ns per pair (median), NEW / BASE paired"
              % (out["spec"], out["size"], out["rounds"]))
        for f, r in out["rows"].items():
            print("  %-9s base %7.1f  new %7.1f  ratio %.3f (%.3f-%.3f)"
                  % (f, r["base_ns"], r["new_ns"], r["ratio"], r["ratio_min"], r["ratio_max"]))
    elif "instructions_per_pair" in out:
        print("%s, %d B: instructions per pair (callgrind)" % (out["spec"], out["size"]))
        for path, per in out["instructions_per_pair"].items():
            print("  %s: %s" % (path, ", ".join("%s %.0f" % kv for kv in per.items())))
    else:
        print("%s, %d B: ns per pair (median of %d), empty loop %.1f ns"
              % (out["spec"], out["size"], args.repetitions, out["loop_ns"]))
        for f, v in out["ns"].items():
            print("  %-9s %7.1f" % (f, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
