#!/usr/bin/env python3
"""Instructions of each sleep and wake of memres-sleep-bench, by callgrind, and their share in
segment code.

For each build tree and spec, the tree's `bench/memres-sleep-bench --calls-only` runs under
`valgrind --tool=callgrind` on the tree's fake driver, with a dump before the first sleep and after
every call of memres_resource_sleep and memres_resource_wake (callgrind 3.19 keeps one
--dump-before): each dump after a call holds that call, in the bench's order (sleep "bench-kv"
with discard, sleep "bench-weights" with backup, wake kv, wake weights), and for the wakes the
bench's few calls between (cuMemGetInfo; thousands of instructions).
For each call: its instructions, and the inclusive instructions of the segment events in it (the
functions named by --segment-fn: the core's raise calls, by default). No GPU is needed; the figures
are instructions, not time (the H200's ns: memres-sleep-bench itself).

    bench/sleep-callgrind.py --tree base=/tmp/base/build --tree new=build \\
        --spec 'cache>arena' --spec arena --spec 'cache>vmm' --buffers 8000

Prints a Markdown table, `--json` the figures.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

from buildtree import plugin_path
from cgannotate import annotate

CALLS = ["sleep kv (discard)", "sleep weights (backup)", "wake kv", "wake weights"]
SEGMENT_FNS = ["memres_resource_raise_segment_event", "memres_resource_raise_segment_events"]


def dumps(build, spec, ns, tmp):
    """The callgrind dump files of one run, in order."""
    out = os.path.join(tmp, "cg.out")
    for f in glob.glob(out + "*"):
        os.unlink(f)
    env = dict(os.environ, MEMRES_PLUGIN_PATH=plugin_path(build),
               MEMRES_CUDA_DRIVER=os.path.join(build, "tests", "fakecuda", "libfakecuda.so"))
    exe = os.path.join(build, "bench", "memres-sleep-bench")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           "--dump-before=memres_resource_sleep", "--dump-after=memres_resource_sleep",
           "--dump-after=memres_resource_wake"]
    cmd += [exe, "--calls-only", "--spec", spec, "--buffers", str(ns.buffers), "--min", str(ns.min), "--max",
            str(ns.max), "--total", str(ns.total)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"sleep-callgrind: {' '.join(cmd)} failed: {res.stderr[-3000:]}")
    files = glob.glob(out + ".*")
    files = [f for _, f in sorted((int(f.rsplit(".", 1)[1].split("-")[0]), f) for f in files)]
    # the dumps made after a call: the call (since the dump before it)
    after = []
    for f in files:
        with open(f) as fh:
            head = fh.read(4096)
        if "Trigger: --dump-after=" in head:
            after.append(f)
    return after


def totals(path, fns):
    """(instructions of the dump, inclusive instructions of the functions @fns in it)."""
    whole, rows = annotate(path, inclusive=True)
    seg = {}
    for ir, rest in rows:
        name = rest.split(" ")[0].split(":")[-1]
        if name in fns:
            # a function listed twice (with and without its object): the larger; the raise
            # calls do not call each other (the batch inlines the single one)
            seg[name] = max(seg.get(name, 0), ir)
    return whole or 0, sum(seg.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=BUILD")
    ap.add_argument("--spec", action="append")
    ap.add_argument("--buffers", type=int, default=8000)
    ap.add_argument("--min", type=int, default=4096)
    ap.add_argument("--max", type=int, default=8 << 20)
    ap.add_argument("--total", type=int, default=512 << 20)
    ap.add_argument("--segment-fn", action="append", help="a segment function (the raise calls)")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    specs = ns.spec or ["cache>arena", "arena", "cache>vmm"]
    fns = set(ns.segment_fn or SEGMENT_FNS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in specs:
            for name, build in (t.split("=", 1) for t in ns.tree):
                calls = [totals(f, fns) for f in dumps(build, spec, ns, tmp)][:len(CALLS)]
                for what, (whole, seg) in zip(CALLS, calls):
                    rows.append({"spec": spec, "tree": name, "call": what, "instructions": whole,
                                 "segments": seg})
    if ns.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    print("| spec | tree | call | instructions | in segment events | share |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        share = 100.0 * r["segments"] / r["instructions"] if r["instructions"] else 0
        print(f"| `{r['spec']}` | {r['tree']} | {r['call']} | {r['instructions']:,} "
              f"| {r['segments']:,} | {share:.0f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
