#!/usr/bin/env python3
"""Two builds of memres measured against each other, paired, in one run.

The GPU machine's CPU has a slow state (about a third slower, for tens of seconds), so a
figure from one process is not comparable with a figure from another run. This runs
`memres-bench ARGS --json` from the two build trees in many short processes that take turns
(base, new, new, base, ...), each pinned to one CPU, and reports for every row and variant the
median over rounds of the ratio new / base of the two processes of a round. A ratio below 1 is
the new build faster. For the pass-through section (`--adaptor`) it also reports each build's
adaptor cost in ns per pair, as memres-bench computes it.

    bench/compare-builds.py --base build-base --new build-gpu --rounds 8 -- \
        -s dmr --adaptor --sizes 256,4KiB,64KiB -r 9 --target-ms 10

Writes the table as Markdown on stdout and every process's JSON to --out (a folder).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from buildtree import plugin_path


def run_once(build, cpu, args):
    env = dict(os.environ, MEMRES_PLUGIN_PATH=plugin_path(build))
    cmd = ["taskset", "-c", str(cpu), os.path.join(build, "bench", "memres-bench")] + args
    cmd += ["--json", "-q"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"compare-builds: {' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()}")
    return json.loads(res.stdout)


def rows(doc):
    """{(section, label, variant): median} and {(section, label): adaptor ns} of one process."""
    medians, costs = {}, {}
    for sec in doc.get("sections", []):
        for row in sec.get("rows", []):
            if row.get("error"):
                continue
            for name, v in row.get("variants", {}).items():
                medians[(sec["name"], row["label"], name)] = v["median"]
            var = row.get("variants", {})
            if sec["name"] == "adaptor" and "raw" in var and row.get("ratio"):
                costs[(sec["name"], row["label"])] = (row["ratio"] - 1) * var["raw"]["median"]
    return medians, costs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the build tree measured against (a folder)")
    ap.add_argument("--new", required=True, help="the build tree under test (a folder)")
    ap.add_argument("--rounds", type=int, default=8, help="processes of each build (8)")
    ap.add_argument("--cpu", type=int, default=2, help="the CPU both are pinned to (2)")
    ap.add_argument("--out", help="a folder for every process's JSON")
    ap.add_argument("bench_args", nargs=argparse.REMAINDER, help="-- then memres-bench's options")
    ns = ap.parse_args()
    args = [a for a in ns.bench_args if a != "--"]
    if ns.rounds < 1:
        sys.exit("compare-builds: --rounds must be at least 1")
    ratios, costs = {}, {"base": {}, "new": {}}
    for r in range(ns.rounds):
        order = ("base", "new") if r % 2 == 0 else ("new", "base")
        got = {}
        for which in order:
            doc = run_once(getattr(ns, which), ns.cpu, args)
            got[which] = rows(doc)
            if ns.out:
                os.makedirs(ns.out, exist_ok=True)
                with open(os.path.join(ns.out, f"round{r:02d}-{which}.json"), "w") as f:
                    json.dump(doc, f)
        for key, new_median in got["new"][0].items():
            base_median = got["base"][0].get(key)
            if base_median:
                ratios.setdefault(key, []).append(new_median / base_median)
        for which in ("base", "new"):
            for key, c in got[which][1].items():
                costs[which].setdefault(key, []).append(c)
    print(f"new / base, median over {ns.rounds} paired rounds (`memres-bench {' '.join(args)}`)\n")
    print("| section | row | variant | new/base | min | max |")
    print("|---|---|---|---|---|---|")
    for key in sorted(ratios):
        v = ratios[key]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {statistics.median(v):.4f} | {min(v):.4f} | {max(v):.4f} |")
    if costs["new"]:
        print("\nadaptor cost, ns per pair ((paired ratio - 1) x raw median), median over rounds\n")
        print("| row | base | new |")
        print("|---|---|---|")
        for key in sorted(costs["new"]):
            b = costs["base"].get(key, [float("nan")])
            print(f"| {key[1]} | {statistics.median(b):.1f} | {statistics.median(costs['new'][key]):.1f} |")


if __name__ == "__main__":
    main()
