#!/usr/bin/env python3
"""What one memres_lookup() costs in instructions and memory traffic, by valgrind, per spec.

For each build tree, spec and number of live buffers, `bench/lookup-count.c` (compiled here once
with `cc`; it opens the tree's libmemres with dlopen) keeps N buffers of SIZE bytes live and runs
bench-lookup.c's loop over the same 4,096 addresses, under `valgrind --tool=cachegrind
--cache-sim=yes` at two loop lengths; per lookup = (X(hi) - X(lo)) / (hi - lo), the loop
included, for X = instructions (Ir), data reads (Dr), data writes (Dw) and first-level data
misses (D1mr + D1mw) of the whole process. The simulated caches are an H200 host's core (Sapphire
Rapids: 48 KiB 12-way L1D, 2 MiB 16-way L2 as the "last level"), not this machine's.

With --lines, `valgrind --tool=lackey --trace-mem=yes` traces a short run, cut at each load from
the loop's array of addresses (lookup-count prints where it lies): the distinct 64-byte lines
each lookup touches, all of them and those only read ("index": the sequence number, the flat
table, the page slot, a split's or runs' record, the entry; the stack's lines are written, the
array of addresses is counted apart), averaged over the lookups after the first 16.

Device specs run on the tree's fake driver (tests/fakecuda/libfakecuda.so); `--env VAR=VALUE`
sets a variable for every run (FAKECUDA_POOL_SPREAD=1GiB: each pool chunk in a GiB of its own).
No GPU is needed; the figures are counts, not time.

    bench/lookup-cachesim.py --tree base=/tmp/base/build,/tmp/base/libmemres.so --tree new=build \\
        --spec vmm --spec arena --spec 'cache>dmr' --n 1,64,1024 --lines

A tree is NAME=BUILD, or NAME=BUILD,LIBMEMRES to take that library with the tree's plugins and
driver (a copy of an older libmemres). Prints a Markdown table, `--json` the figures.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from buildtree import plugin_path

HERE = os.path.dirname(os.path.abspath(__file__))
CACHES = ["--I1=32768,8,64", "--D1=49152,12,64", "--LL=2097152,16,64"]
TRACE = re.compile(r"^ ([LSM]) ([0-9a-fA-F]+),(\d+)")


def compile_counter(tmp):
    exe = os.path.join(tmp, "lookup-count")
    subprocess.run(["cc", "-O2", "-g", "-o", exe, os.path.join(HERE, "lookup-count.c"),
                    os.path.join(HERE, "dlopen-count.c"), "-ldl"], check=True)
    return exe


def tree_env(build, extra):
    env = dict(os.environ, MEMRES_PLUGIN_PATH=plugin_path(build),
               MEMRES_CUDA_DRIVER=os.path.join(build, "tests", "fakecuda", "libfakecuda.so"))
    env.update(extra)
    return env


def cachegrind(exe, lib, env, spec, size, n, lookups, tmp):
    """{event: count} of the whole process."""
    out = os.path.join(tmp, "cg.out")
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--cachegrind-out-file=" + out
           ] + CACHES + [exe, lib, spec, str(size), str(n), str(lookups)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"lookup-cachesim: {' '.join(cmd)} failed: {res.stderr[-2000:]}")
    events = summary = None
    with open(out) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                summary = [int(x) for x in line.split()[1:]]
    return dict(zip(events, summary))


def lines(exe, lib, env, spec, size, n, tmp, lookups=200, skip=16):
    """(all, index) distinct lines per lookup, averaged, from a lackey trace."""
    log = os.path.join(tmp, "lackey.log")
    env = dict(env, LOOKUP_COUNT_ADDRESSES="1")
    cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-file=" + log, exe, lib, spec,
           str(size), str(n), str(lookups)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"addresses 0x([0-9a-f]+) (\d+)", res.stderr)
    if res.returncode != 0 or m is None:
        sys.exit(f"lookup-cachesim: {' '.join(cmd)} failed: {res.stderr[-2000:]}")
    lo = int(m.group(1), 16)
    hi = lo + int(m.group(2))
    per = []  # per lookup: {line: written?}
    cur = None
    with open(log) as f:
        for text in f:
            t = TRACE.match(text)
            if t is None:
                continue
            kind, addr, nbytes = t.group(1), int(t.group(2), 16), int(t.group(3))
            if kind == "L" and lo <= addr < hi:
                cur = {}
                per.append(cur)
                continue
            if cur is None:
                continue
            for line in range(addr >> 6, ((addr + nbytes - 1) >> 6) + 1):
                cur[line] = cur.get(line, False) or kind != "L"
    os.unlink(log)
    body = per[skip:-1]  # the last one runs into the program's end
    if not body:
        sys.exit("lookup-cachesim: no lookups found in the trace")
    total = sum(len(p) for p in body) / len(body)
    index = sum(sum(1 for w in p.values() if not w) for p in body) / len(body)
    return total, index


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=BUILD[,LIB]")
    ap.add_argument("--spec", action="append", help="a spec (vmm, arena, cache>dmr)")
    ap.add_argument("--size", type=int, default=1 << 20, help="bytes per buffer (1 MiB)")
    ap.add_argument("--n", default="1,64,1024", help="numbers of live buffers (1,64,1024)")
    ap.add_argument("--lookups", default="100000,200000", help="the two loop lengths")
    ap.add_argument("--lines", action="store_true", help="also lines per lookup (lackey)")
    ap.add_argument("--env", action="append", default=[], metavar="VAR=VALUE")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    extra = dict(e.split("=", 1) for e in ns.env)
    trees = []
    for t in ns.tree:
        name, rest = t.split("=", 1)
        build, _, lib = rest.partition(",")
        trees.append((name, build, lib or os.path.join(build, "core", "libmemres.so")))
    specs = ns.spec or ["vmm", "arena", "cache>dmr"]
    counts = [int(x) for x in ns.n.split(",")]
    lo, hi = (int(x) for x in ns.lookups.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_counter(tmp)
        for spec in specs:
            for n in counts:
                for name, build, lib in trees:
                    env = tree_env(build, extra)
                    a = cachegrind(exe, lib, env, spec, ns.size, n, lo, tmp)
                    b = cachegrind(exe, lib, env, spec, ns.size, n, hi, tmp)
                    d = {k: (b[k] - a[k]) / (hi - lo) for k in a}
                    row = {"spec": spec, "n": n, "tree": name, "Ir": d["Ir"], "Dr": d["Dr"],
                           "Dw": d["Dw"], "D1miss": d["D1mr"] + d["D1mw"],
                           "L2miss": d["DLmr"] + d["DLmw"]}
                    if ns.lines:
                        row["lines"], row["index_lines"] = lines(exe, lib, env, spec, ns.size, n,
                                                                 tmp)
                    rows.append(row)
    if ns.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    cols = ["Ir", "Dr", "Dw", "D1miss", "L2miss"] + (["lines", "index_lines"] if ns.lines else [])
    print("| spec | buffers | tree | " + " | ".join(cols) + " |")
    print("|---" * (3 + len(cols)) + "|")
    for r in rows:
        print(f"| `{r['spec']}` | {r['n']:,} | {r['tree']} | "
              + " | ".join(f"{r[c]:.2f}" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
