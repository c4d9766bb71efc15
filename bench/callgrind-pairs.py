#!/usr/bin/env python3
"""Instructions per allocate+close pair, by callgrind, for several build trees side by side.

For each build tree and spec, `bench/pair-count.c` (compiled here once, with `cc`; it opens the
tree's libmemres with dlopen, so one binary serves any tree, trees from before tags included)
runs N pairs under `valgrind --tool=callgrind` at two N; per pair = (X(hi) - X(lo)) / (hi - lo),
an exact figure, for X = the whole process's instructions ("whole") and memres' own ("own": the
functions `callgrind_annotate` puts in files under the tree's core/, plugins/, sdk/ or interop/;
not libc, GLib, the fake driver or the loop). Device specs run on the tree's fake driver
(tests/fakecuda/libfakecuda.so), host specs on none. No GPU is needed; the figures are
instructions, not time (the GPU machine's paired ns: compare-builds.py).

    bench/callgrind-pairs.py --tree base=/tmp/base/build --tree new=build \\
        --spec 'cache>host' --spec 'cache>dmr' --tag weights

`--tag TAG` adds a tagged row for each spec (memres_tag_push(TAG) before the pairs; a tree
without tags gives its untagged figure there, the cost before tags existed). Prints a Markdown
table (own / whole per tree, and each tree's difference from the first), `--json` the figures.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from buildtree import plugin_path
from cgannotate import annotate

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_driver(tmp):
    exe = os.path.join(tmp, "pair-count")
    subprocess.run(["cc", "-O2", "-g", "-o", exe, os.path.join(HERE, "pair-count.c"),
                    os.path.join(HERE, "dlopen-count.c"), "-ldl"],
                   check=True)
    return exe


def source_root(build):
    """The tree's sources, as meson recorded them (the files callgrind names)."""
    info = os.path.join(build, "meson-info", "meson-info.json")
    with open(info) as f:
        return os.path.realpath(json.load(f)["directories"]["source"])


def counts(exe, build, spec, size, n, tag, tmp):
    """(whole, own) instructions of one process of N pairs."""
    out = os.path.join(tmp, "cg.out")
    env = dict(os.environ, MEMRES_PLUGIN_PATH=plugin_path(build))
    env.pop("MEMRES_CUDA_DRIVER", None)
    if "host" not in spec.split(">")[-1]:
        env["MEMRES_CUDA_DRIVER"] = os.path.join(build, "tests", "fakecuda", "libfakecuda.so")
    lib = os.path.join(build, "core", "libmemres.so")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, exe, lib, spec,
           str(size), str(n)] + ([tag] if tag else [])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"callgrind-pairs: {' '.join(cmd)} failed: {res.stderr[-2000:]}")
    whole, rows = annotate(out)
    root = source_root(build)
    own = 0
    for ir, rest in rows:
        fm = re.search(r"(\S+):\S+", rest)
        if fm is None:
            continue
        # callgrind_annotate shows paths under its working directory relative to it
        rel = os.path.relpath(os.path.realpath(fm.group(1)), root)
        if rel.split("/")[0] in ("core", "plugins", "sdk", "interop"):
            own += ir
    if whole is None:
        sys.exit("callgrind-pairs: no totals in callgrind_annotate's output")
    return whole, own


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=BUILD",
                    help="a build tree and its column's name (the first is the base)")
    ap.add_argument("--spec", action="append", help="a spec (cache>host and cache>dmr)")
    ap.add_argument("--tag", help="also each spec tagged, under this tag")
    ap.add_argument("--size", type=int, default=4096, help="bytes per allocation (4096)")
    ap.add_argument("--n", default="20000,40000", help="the two loop lengths (20000,40000)")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args()
    trees = [t.split("=", 1) for t in ns.tree]
    specs = ns.spec or ["cache>host", "cache>dmr"]
    lo, hi = (int(x) for x in ns.n.split(","))
    rows = [(s, None) for s in specs] + ([(s, ns.tag) for s in specs] if ns.tag else [])
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_driver(tmp)
        for spec, tag in rows:
            for name, build in trees:
                a = counts(exe, build, spec, ns.size, lo, tag, tmp)
                b = counts(exe, build, spec, ns.size, hi, tag, tmp)
                figures[(spec, tag, name)] = tuple((y - x) / (hi - lo) for x, y in zip(a, b))
    if ns.json:
        json.dump([{"spec": s, "tag": t, "tree": n, "whole": w, "own": o}
                   for (s, t, n), (w, o) in figures.items()], sys.stdout, indent=1)
        print()
        return 0
    names = [n for n, _ in trees]
    print("| spec | " + " | ".join(f"{n} own / whole" for n in names)
          + "".join(f" | {n} − {names[0]} (own / whole)" for n in names[1:]) + " |")
    print("|---" * (1 + 2 * len(names) - 1) + "|")
    for spec, tag in rows:
        cells = [figures[(spec, tag, n)] for n in names]
        label = f"`{spec}`" + (f" tagged" if tag else "")
        line = f"| {label} | " + " | ".join(f"{o:g} / {w:g}" for w, o in cells)
        for c in cells[1:]:
            line += f" | {c[1] - cells[0][1]:+g} / {c[0] - cells[0][0]:+g}"
        print(line + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
