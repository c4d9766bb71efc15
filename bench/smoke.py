#!/usr/bin/env python3
"""Smoke tests of the benchmark harness (suite fake). They assert that the programs run, exit
as documented and print well-formed JSON with the expected structure; never timings.

  smoke.py bench MEMRES_BENCH        memres-bench --quick against the driver in the environment
  smoke.py peers PEERS_PY LIBMEMRES  peers.py --quick, memres through ctypes and the package
  smoke.py run-all RUN_ALL BUILD     run-all.sh --quick into a scratch directory
  smoke.py sleep SLEEP_BENCH ARGS... memres-sleep-bench ARGS: its JSON, the weights' wake
                                     split into the raw create + map and the copy, and the kv
                                     discard's driver calls equal to the raw ones (the fake's)
  smoke.py random-peak MEMRES_BENCH  memres-bench --random against `arena`: peak reserved over
                                     peak requested, issue 38's target 5 (a memory figure,
                                     deterministic on the fake)
"""

import json
import os
import subprocess
import sys
import tempfile


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def run(argv, expect_rc=0):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=240)
    if p.returncode != expect_rc:
        fail("%s exited %d, not %d\nstdout:\n%s\nstderr:\n%s"
             % (" ".join(argv), p.returncode, expect_rc, p.stdout[-4000:], p.stderr[-4000:]))
    return p


def plugin_exists(kind):
    for d in os.environ.get("MEMRES_PLUGIN_PATH", "").split(":"):
        if d and os.path.exists(os.path.join(d, "libmemres-%s.so" % kind)):
            return True
    return False


def check_summary(where, s):
    for key in ("median", "min", "max", "q1", "q3"):
        if not isinstance(s.get(key), (int, float)) or s[key] <= 0:
            fail("%s: %s is %r" % (where, key, s.get(key)))
    if not s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"]:
        fail("%s: statistics out of order: %r" % (where, s))
    if s["repetitions"] < 1 or s["iterations"] < 1:
        fail("%s: no repetitions or iterations: %r" % (where, s))


def check_bench_json(text, sections, variants=("memres", "raw")):
    try:
        doc = json.loads(text)
    except ValueError as e:
        fail("memres-bench printed invalid JSON (%s):\n%s" % (e, text[:2000]))
    for key in ("spec", "kind", "gpu", "driver_version", "date", "command"):
        if key not in doc:
            fail("JSON lacks %r" % key)
    names = [s["name"] for s in doc["sections"]]
    if names != list(sections):
        fail("sections %r, expected %r" % (names, list(sections)))
    for section in doc["sections"]:
        if not section["rows"]:
            fail("section %s has no rows" % section["name"])
        for row in section["rows"]:
            where = "%s/%s" % (section["name"], row["label"])
            if row["error"] is not None:
                fail("%s failed: %s" % (where, row["error"]))
            for v in variants if section["name"] != "copy" else ("memres", "raw", "pageable"):
                if v not in row["variants"]:
                    fail("%s lacks variant %s" % (where, v))
                check_summary("%s/%s" % (where, v), row["variants"][v])
            if not row["ratio"] > 0:
                fail("%s: ratio %r" % (where, row["ratio"]))
    return doc


def check_ipc_import(doc, n_buffers):
    if doc["spec"].split(":")[0] != "ipc" or doc["import_buffers"] != n_buffers:
        fail("ipc import ran on %r with %r buffers" % (doc["spec"], doc["import_buffers"]))
    rows = section_rows(doc, "ipc_import")
    labels = [r["label"] for r in rows]
    if labels != ["pool + first buffer", "per buffer (%d distinct)" % n_buffers]:
        fail("ipc_import rows %r" % labels)
    if [r["units"] for r in rows] != [1, n_buffers]:
        fail("ipc_import units %r" % [r["units"] for r in rows])


def section_rows(doc, name):
    for s in doc["sections"]:
        if s["name"] == name:
            return s["rows"]
    fail("no section %s" % name)


def smoke_bench(exe):
    # (a) to (c) on dmr, with the quick defaults
    p = run([exe, "--quick", "--json", "--quiet", "--spec", "dmr"])
    doc = check_bench_json(p.stdout, ["pairs", "random", "threads"])
    if [r["size"] for r in doc["sections"][0]["rows"]] != [256, 4096, 65536, 1 << 20]:
        fail("quick pair sizes are wrong")
    if [r["threads"] for r in doc["sections"][2]["rows"]] != [1, 2, 4]:
        fail("quick thread counts are wrong")
    # the table form prints every row
    p = run([exe, "--quick", "--quiet", "--pairs", "--sizes", "4KiB,1MiB"])
    if "4 KiB" not in p.stdout or "1 MiB" not in p.stdout or "ratio" not in p.stdout:
        fail("table lacks rows:\n" + p.stdout)
    # the kinds merged so far
    if plugin_exists("pinned"):
        p = run([exe, "--quick", "--json", "--quiet", "--spec", "pinned", "--pairs", "--copy"])
        check_bench_json(p.stdout, ["pairs", "copy"])
    if plugin_exists("vmm"):
        p = run([exe, "--quick", "--json", "--quiet", "--spec", "vmm", "--pairs", "--vmm-grow"])
        check_bench_json(p.stdout, ["pairs", "vmm_grow"])
        # --lookup alone picks the vmm spec; without segments all 4 --quick rows fail, exit 3
        p = run([exe, "--quick", "--json", "--quiet", "--lookup"])
        check_bench_json(p.stdout, ["lookup"])
        p = run([exe, "--quick", "--quiet", "--spec", "dmr", "--lookup"], expect_rc=3)
        if p.stdout.count("FAILED: --lookup needs a resource whose kind has segments") != 4:
            fail("--lookup on dmr:\n" + p.stdout)
    if plugin_exists("managed"):
        p = run([exe, "--quick", "--json", "--quiet", "--spec", "managed", "--pairs"])
        doc = check_bench_json(p.stdout, ["pairs"])
        if "cuMemAllocFromPoolAsync" not in doc["sections"][0]["raw"]:
            fail("managed pairs are not paired with the raw pool calls: %r"
                 % doc["sections"][0]["raw"])
    if plugin_exists("arena"):
        # --raw-pool: the arena's pairs against the raw pool pair (issue 38, target 5)
        p = run([exe, "--quick", "--json", "--quiet", "--spec", "arena", "--pairs", "--raw-pool",
                 "--sizes", "256,64KiB"])
        doc = check_bench_json(p.stdout, ["pairs"])
        if "cuMemAllocFromPoolAsync" not in doc["sections"][0]["raw"]:
            fail("arena --raw-pool pairs are not paired with the raw pool calls: %r"
                 % doc["sections"][0]["raw"])
    # --raw-pool on a resource on no device: the row fails with the reason, exit 3
    p = run([exe, "--quick", "--quiet", "--spec", "host", "--pairs", "--raw-pool"], expect_rc=3)
    if "FAILED: --raw-pool needs a resource on a device" not in p.stdout:
        fail("--raw-pool on host:\n" + p.stdout)
    if plugin_exists("ipc"):
        p = run([exe, "--quick", "--json", "--quiet", "--spec", "ipc", "--pairs", "--ipc-import"])
        check_ipc_import(check_bench_json(p.stdout, ["pairs", "ipc_import"]), 16)
        # --ipc-import alone picks the ipc spec; --import-buffers sets the per-buffer row's N
        p = run([exe, "--quick", "--json", "--quiet", "--ipc-import", "--import-buffers", "5"])
        check_ipc_import(check_bench_json(p.stdout, ["ipc_import"]), 5)
        # a kind that cannot export: both rows fail with the reason, exit 3
        p = run([exe, "--quick", "--quiet", "--spec", "dmr", "--ipc-import"], expect_rc=3)
        if p.stdout.count("FAILED: --ipc-import needs a spec that exports its pool") != 2:
            fail("--ipc-import on dmr:\n" + p.stdout)
        run([exe, "--ipc-import", "--import-buffers", "70000"], expect_rc=2)
    if plugin_exists("graph"):
        # --graph-capture alone picks the graph spec
        p = run([exe, "--quick", "--json", "--quiet", "--graph-capture"])
        doc = check_bench_json(p.stdout, ["graph_capture"])
        if doc["spec"].split(":")[0] != "graph":
            fail("--graph-capture ran on %r" % doc["spec"])
        p = run([exe, "--quick", "--quiet", "--spec", "dmr", "--graph-capture"], expect_rc=3)
        if "FAILED: --graph-capture needs a spec of the graph kind" not in p.stdout:
            fail("--graph-capture on dmr:\n" + p.stdout)
    # a spec that cannot be created: exit 1 and exactly one line on stderr
    p = run([exe, "--quick", "--spec", "nosuchkind"], expect_rc=1)
    lines = p.stderr.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith("memres-bench: cannot create 'nosuchkind'"):
        fail("bad spec gave stderr %r" % p.stderr)
    if p.stdout:
        fail("bad spec printed on stdout: %r" % p.stdout)
    # a bad command line: exit 2
    run([exe, "--sizes", "12XB"], expect_rc=2)
    run([exe, "--vmm-grow", "--spec", "dmr", "--quick", "--quiet"], expect_rc=3)


def smoke_peers(script, libmemres):
    p = run([sys.executable, script, "--quick", "--json", "--quiet", "--libmemres", libmemres,
             "--sizes", "256,64KiB", "--peers", "memres,python"])
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        fail("peers.py printed invalid JSON (%s):\n%s" % (e, p.stdout[:2000]))
    if [s["name"] for s in doc["peers"]] != ["memres", "python"]:
        fail("--peers memres,python ran %r" % [s["name"] for s in doc["peers"]])
    run([sys.executable, script, "--peers", "memres,nosuchpeer"], expect_rc=2)
    status = {s["name"]: s for s in doc["peers"]}
    if not status.get("memres", {}).get("available"):
        fail("memres peer unavailable: %r" % status.get("memres"))
    for name, s in status.items():
        if not s["available"] and not s["reason"]:
            fail("peer %s is n/a without a reason" % name)
    if doc.get("warmup_pairs") != 300:
        fail("quick warm-up is %r pairs, not 300" % doc.get("warmup_pairs"))
    if [r["size"] for r in doc["pairs"]] != [256, 65536]:
        fail("pair rows: %r" % doc["pairs"])
    for row in doc["pairs"] + [doc["random"]]:
        for name in ("memres", "python"):
            check_summary("peers/%s/%s" % (row.get("label", "random"), name),
                          row["results"][name])
    ops, live = doc["random"]["operations"], doc["random"]["live"]
    if ops % 2 or not 3 * live <= ops <= 5 * live:  # every allocation freed once
        fail("random trace has %d operations for %d live" % (ops, live))
    # the Python package's peers (memres-py over cache>dmr, memres-py-arena over arena), where
    # the build made the package: measured, or n/a with a reason (a build without Python's
    # headers, another interpreter)
    p = run([sys.executable, script, "--quick", "--json", "--quiet", "--libmemres", libmemres,
             "--sizes", "256", "--peers", "memres-py,memres-py-arena"])
    doc = json.loads(p.stdout)
    for status in doc["peers"]:
        name = status["name"]
        if status["available"]:
            check_summary("peers/256 B/" + name, doc["pairs"][0]["results"][name])
        elif not status["reason"]:
            fail("peer %s is n/a without a reason" % name)
    if [s["name"] for s in doc["peers"]] != ["memres-py", "memres-py-arena"]:
        fail("package peers: %r" % doc["peers"])


def smoke_run_all(script, build):
    with tempfile.TemporaryDirectory() as out:
        # only the peers that use memres's driver: the fake suite must not touch a real GPU
        os.environ["PEERS"] = "memres,python"
        run(["bash", script, "--quick", build, out])
        for name in ("RESULTS.md", "bench-raw.json", "bench.log"):
            if not os.path.exists(os.path.join(out, name)):
                fail("run-all.sh left no %s in %s: %r" % (name, out, os.listdir(out)))
        with open(os.path.join(out, "bench-raw.json")) as f:
            raw = json.load(f)
        if "dmr" not in raw.get("bench", {}) or "peers" not in raw:
            fail("bench-raw.json lacks dmr or peers: %r" % list(raw))
        check_bench_json(json.dumps(raw["bench"]["dmr"]), ["pairs", "random", "threads"])
        needles = ["# memres benchmark results", "dmr", "ratio", "target"]
        if plugin_exists("graph"):
            check_bench_json(json.dumps(raw["bench"].get("graph")), ["graph_capture"])
            needles += ["## graph (`graph"]
        if plugin_exists("ipc"):
            doc = check_bench_json(json.dumps(raw["bench"].get("ipc")), ["pairs", "ipc_import"])
            check_ipc_import(doc, 16)
            needles += ["| ipc import pool+first buffer ≤ 1.10× raw | worst ",
                        "| ipc per-buffer import ≤ 1.10× raw | worst "]
        if plugin_exists("cache"):
            check_bench_json(json.dumps(raw["bench"].get("cache")),
                             ["pairs", "random", "thread_pairs", "alternating"])
            check_bench_json(json.dumps(raw["bench"].get("cache_host")), ["pairs", "core"])
            needles += ["| cache>dmr pair ≤ 40 ns and ≤ 1/14 of the raw pool pair, every size |",
                        "| cache>dmr 16 threads ≥ 10× 1 thread | not run |",
                        "cache>dmr random: peak reserved ≤ 1.3× peak used"]
        # every memres-bench step succeeds; peers.py may not (a sanitized libmemres cannot be
        # loaded by ctypes; bench-peers-quick covers it in plain builds); torch-bench.sh (no
        # --time-limit: run-all.sh times it out itself) skips where torch is absent, with 0
        bad = [s for s in raw["steps"]
               if ("--time-limit" not in s["command"] and s["name"] != "torch")
               or (s["rc"] != 0 and s["name"] != "peers")]
        if not raw["steps"] or bad:
            fail("steps %r" % (bad or raw["steps"]))
        with open(os.path.join(out, "RESULTS.md")) as f:
            text = f.read()
        for needle in needles:
            if needle not in text:
                fail("RESULTS.md lacks %r:\n%s" % (needle, text[:3000]))


def smoke_sleep(exe, *args):
    p = run([exe] + list(args))
    try:
        doc = json.loads(p.stdout)
    except ValueError as e:
        fail("memres-sleep-bench printed invalid JSON (%s):\n%s" % (e, p.stdout[:2000]))
    if doc.get("addresses_and_checksums_identical") is not True:
        fail("addresses or checksums changed: %r" % doc)
    for key in ("wake_ms", "wake_weights_backup_ms", "weights_raw_create_map_ms",
                "weights_raw_handles", "weights_raw_bytes", "weights_wake_gbps",
                "weights_copy_only_gbps", "wake_vs_h2d", "copy_only_vs_h2d", "pinned_h2d_gbps"):
        if not isinstance(doc.get(key), (int, float)) or doc[key] < 0:
            fail("%s is %r" % (key, doc.get(key)))
    # the weights slept with backup: their wake made physical memory again, which the raw
    # baseline made alone, and it is part of the whole wake
    if doc["weights_raw_handles"] < 1 or doc["weights_raw_bytes"] <= 0:
        fail("no raw baseline for the weights: %r" % doc)
    if not doc["weights_raw_create_map_ms"] <= doc["wake_weights_backup_ms"] <= doc["wake_ms"]:
        fail("create + map %r ms, weights' wake %r ms, wake %r ms: out of order"
             % (doc["weights_raw_create_map_ms"], doc["wake_weights_backup_ms"], doc["wake_ms"]))
    if doc["weights_copy_only_gbps"] < doc["weights_wake_gbps"]:
        fail("the copy alone is slower than the whole wake: %r" % doc)
    # on the fake, the kv discard sleep's and wake's driver calls are the raw calls for the same
    # allocations (issue 34's like-for-like baseline): no unmap, release, create, map or grant
    # more, and the wake nothing else
    calls = doc.get("kv_driver_calls")
    if not isinstance(calls, dict) or not isinstance(calls.get("sleep"), dict):
        fail("kv_driver_calls is %r (the smoke test runs on the fake driver)" % calls)
    for phase, raw in (("sleep", "raw_sleep"), ("wake", "raw_wake")):
        for entry, n in calls[raw].items():
            if calls[phase].get(entry) != n:
                fail("the kv %s made %r %s calls, the raw baseline %r: %r"
                     % (phase, calls[phase].get(entry), entry, n, calls))
    if calls["wake"]["other"] != 0 or calls["raw_wake"]["cuMemCreate"] < 1:
        fail("the kv wake: %r" % calls)


def random_peak(exe, spec):
    """Section (b)'s peak reserved / peak requested for @spec (its own seed, 42)."""
    p = run([exe, "--json", "--quiet", "--random", "-r", "1", "--target-ms", "1", "--spec", spec])
    row = section_rows(check_bench_json(p.stdout, ["random"]), "random")[0]
    if not row.get("peak_requested"):
        fail("%s: no peak figures in %r" % (spec, row))
    return row["peak_reserved"] / row["peak_requested"]


def smoke_random_peak(exe):
    # Issue 38, target 5: the random workload's (1,000 live, 1 KiB-4 MiB, seed 42) peak reserved
    # at most 1.05 times its peak requested. The free bytes at the peak are slivers of granules
    # that live neighbours hold; settle=eager coalesces the stream's frees with the settled holes
    # around them before best fit: 1.034 (1.066 by default; both on the fake at 4, 80 and
    # 141 GiB: bench/RESULTS.md).
    eager = random_peak(exe, "arena:settle=eager")
    lazy = random_peak(exe, "arena")
    print("arena:settle=eager %.4f, arena %.4f" % (eager, lazy))
    if not eager <= 1.05:
        fail("arena:settle=eager: peak reserved / requested %.4f > 1.05" % eager)
    # the default is not there yet (bench/RESULTS.md): held where it is, and above eager's
    if not eager < lazy <= 1.08:
        fail("arena: peak reserved / requested %.4f (eager %.4f)" % (lazy, eager))


def main():
    if len(sys.argv) < 3:
        fail(__doc__)
    mode, args = sys.argv[1], sys.argv[2:]
    {"bench": smoke_bench, "peers": smoke_peers, "run-all": smoke_run_all,
     "sleep": smoke_sleep, "random-peak": smoke_random_peak}[mode](*args)
    print("ok")


if __name__ == "__main__":
    main()
