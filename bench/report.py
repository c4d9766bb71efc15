#!/usr/bin/env python3
"""Writes RESULTS.md (and latency.png, when matplotlib is there) from the JSON that
bench/run-all.sh collected: memres-bench's output per kind (dmr.json, pinned.json, vmm.json,
ipc.json, graph.json), peers.py's (peers.json) and the steps run (steps.tsv). Also writes bench-raw.json,
every result in one file. Needs only the standard library; the plot is skipped without
matplotlib.

  report.py --input DIR --output DIR [--copy-to SRC/bench] [--run-all "COMMAND"]
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import sys

KINDS = ("dmr", "pinned", "vmm", "ipc", "graph", "managed", "cache", "cache_host", "arena")
GIB = 1 << 30
TARGET_RATIO = 1.10  # memres time / raw time, at most
TARGET_COPY = 0.97  # memres throughput / raw throughput, at least
TARGET_GROW_MS = 2.0  # one 1 GiB grow
PEER_LABELS = {"memres": "memres (ctypes)", "memres-py": "memres (package)",
               "memres-py-arena": "memres (package, arena)", "cuda.core": "cuda.core",
               "torch": "PyTorch",
               "cupy": "CuPy", "cuda.bindings": "cuda.bindings (raw driver)",
               "python": "Python floor"}
RIVALS = ("cuda.core", "torch", "cupy")
# the Python package (issue 36): its pair / CuPy's pool pair at every size up to the cache's
# max_block, at most
PACKAGE_PEERS = ("memres-py", "memres-py-arena")
PACKAGE_CUPY_RATIO = 0.4
PACKAGE_MAX_BLOCK = 64 << 20
# the cache adaptor (issue 17): memres time / raw pool time per pair, at most; ns per pair, at
# most; random workload memres / raw, at most; peak reserved / peak requested, at most; torch
# time / memres time, at least; 16-thread aggregate / 1-thread, at least
CACHE_PAIR_RATIO = 1 / 14.0
CACHE_PAIR_NS = 40.0
CACHE_RANDOM_RATIO = 0.1
CACHE_PEAK_RATIO = 1.3
CACHE_TORCH_SPEEDUP = 10.0
CACHE_THREAD_SCALING = 10.0
# the arena kind (issue 38, target 5): its pair / the raw pool pair (dmr's step, same run) at
# every size its classes serve (up to max_block, 64 KiB), at most; 16-thread aggregate / 1-thread,
# at least; random workload's peak reserved / peak used, at most
ARENA_PAIR_RATIO = 1 / 14.0
ARENA_MAX_BLOCK = 64 << 10
ARENA_THREAD_SCALING = 10.0
ARENA_PEAK_RATIO = 1.05
# memres_lookup() time / cuPointerGetAttribute time, at most (issue 37: 25 times faster)
LOOKUP_RATIO = 1 / 25.0
# per kind and section: the ratio a row must stay under (None: no target)
SECTION_TARGETS = {("cache", "pairs"): CACHE_PAIR_RATIO, ("cache", "random"): CACHE_RANDOM_RATIO,
                   ("cache", "thread_pairs"): None, ("cache", "alternating"): None,
                   ("cache_host", "pairs"): None, ("cache_host", "core"): None,
                   ("arena", "pairs"): None, ("arena", "random"): None,
                   ("arena", "thread_pairs"): None,
                   ("vmm", "lookup"): LOOKUP_RATIO}


def load(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except OSError as e:
        return None, "no output (%s)" % e.strerror
    except ValueError as e:
        return None, "invalid JSON (%s)" % e


def read_steps(path):
    steps = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == 4:
                    steps.append({"name": parts[0], "rc": int(parts[1]), "seconds": int(parts[2]),
                                  "command": parts[3]})
    except OSError:
        pass
    return steps


def fmt_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return "%g %s" % (n, unit)
        n /= 1024.0


def fmt(v, digits=4):
    if v is None:
        return "–"
    if v >= 100:
        return "%.0f" % v
    return "%.*g" % (digits, v)


def section(doc, name):
    for s in (doc or {}).get("sections", []):
        if s["name"] == name:
            return s
    return None


def ok_rows(sec):
    return [r for r in (sec or {}).get("rows", []) if r.get("error") is None and r.get("variants")]


def ceiling_scaling(sec, threads=16):
    """The ceiling's aggregate at @threads over its one-thread aggregate (memres-bench's control
    of the thread pairs: a loop that shares nothing), as text, or "" where it was not run."""
    rows = {r["threads"]: r["variants"]["ceiling"]["median"] for r in ok_rows(sec)
            if "ceiling" in r["variants"]}
    if 1 not in rows or threads not in rows:
        return ""
    return "; the machine's ceiling %.1f×" % (rows[1] / rows[threads])


def verdict(ok):
    return "**yes**" if ok else "**NO**"


# ---- tables ------------------------------------------------------------------------------------


def iqr(s, f=lambda x: x):
    a, b = f(s["q1"]), f(s["q3"])
    return "%s [%s–%s]" % (fmt(f(s["median"])), fmt(min(a, b)), fmt(max(a, b)))


def ratio_cell(r):
    """The paired ratio with its quartiles (older result files have the ratio alone)."""
    if r.get("ratio_q1") is None:
        return "%.3f×" % r["ratio"]
    return "%.3f× [%.3f–%.3f]" % (r["ratio"], r["ratio_q1"], r["ratio_q3"])


def time_table(sec, first_col, unit, scale=1.0, extra=None, target=TARGET_RATIO):
    """Rows of a time section: memres and raw median [IQR] in @unit (ns x @scale), ratio."""
    lines = ["| %s | memres %s | raw %s | ratio | %s |" % (
        first_col, unit, unit, "≤ %.3g×" % target if target is not None else "target"),
             "|---|---:|---:|---:|:-:|"]
    if extra:
        lines[0] += " %s |" % extra[0]
        lines[1] += "---:|"
    for r in sec["rows"]:
        if r.get("error"):
            lines.append("| %s | failed: %s | | | |" % (r["label"], r["error"].replace("|", "/")))
            continue
        m, w = r["variants"]["memres"], r["variants"]["raw"]
        cells = [r["label"], iqr(m, lambda x: x * scale), iqr(w, lambda x: x * scale),
                 ratio_cell(r), "–" if target is None else "yes" if r["ratio"] <= target else "no"]
        if extra:
            cells.append(extra[1](r))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def copy_table(sec):
    lines = ["| direction | memres GB/s | raw GB/s | pageable GB/s | memres/raw | ≥ %.2f× |"
             % TARGET_COPY, "|---|---:|---:|---:|---:|:-:|"]
    for r in sec["rows"]:
        if r.get("error"):
            lines.append("| %s | failed: %s | | | | |" % (r["label"], r["error"]))
            continue
        gbps = lambda ns, size=r["size"]: size / ns  # noqa: E731 (bytes per ns = GB/s)
        v = r["variants"]
        ratio = v["raw"]["median"] / v["memres"]["median"]
        lines.append("| %s | %s | %s | %s | %.3f× | %s |" % (
            r["label"], iqr(v["memres"], gbps), iqr(v["raw"], gbps), iqr(v["pageable"], gbps),
            ratio, "yes" if ratio >= TARGET_COPY else "no"))
    return lines


def grow_ms(doc, ns):
    return ns / 1e6 / (doc["grow_size"] / GIB)


def peers_table(peers, bench_dmr):
    names = [p["name"] for p in peers["peers"] if p["available"]]
    c_pairs = {r["size"]: r for r in ok_rows(section(bench_dmr, "pairs"))}
    head = ["size"] + [PEER_LABELS.get(n, n) for n in names] + ["memres (C)", "raw driver (C)",
                                                                  "memres ahead"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + ":-:|"]
    rows = [(r["label"], r["results"], c_pairs.get(r["size"])) for r in peers["pairs"]]
    c_random = ok_rows(section(bench_dmr, "random"))
    rows.append(("random (ns/op)", peers["random"]["results"], c_random[0] if c_random else None))
    for label, res, c in rows:
        cells = [label]
        for n in names:
            r = res.get(n, {})
            cells.append(fmt(r["median"]) if "median" in r else "error")
        cells.append(fmt(c["variants"]["memres"]["median"]) if c else "–")
        cells.append(fmt(c["variants"]["raw"]["median"]) if c else "–")
        cells.append(ahead_text(res))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def ahead(res, who="memres"):
    """None when @who has no number; else the rivals (with numbers) it is not ahead of."""
    m = res.get(who, {}).get("median")
    if m is None:
        return None
    return [n for n in RIVALS if "median" in res.get(n, {}) and res[n]["median"] <= m]


def ahead_text(res):
    behind = ahead(res)
    if behind is None:
        return "–"
    present = [n for n in RIVALS if "median" in res.get(n, {})]
    if not present:
        return "no rivals"
    return "yes" if not behind else "no (%s)" % ", ".join(PEER_LABELS[n] for n in behind)


# ---- targets -----------------------------------------------------------------------------------


def target_rows(docs, peers):
    out = []

    def ratio_target(what, doc, name, pick=lambda r: True, limit=TARGET_RATIO):
        rows = [r for r in ok_rows(section(doc, name)) if pick(r)]
        failed = [r for r in (section(doc, name) or {}).get("rows", [])
                  if r.get("error") and pick(r)]
        if not rows:
            if failed:
                out.append((what, "all %d row(s) failed: %s" % (len(failed), failed[0]["error"]),
                            verdict(False)))
            else:
                out.append((what, "not run" if doc is None else "no result", "–"))
            return
        worst = max(rows, key=lambda r: r["ratio"])
        text = "worst %.3f× (%s)" % (worst["ratio"], worst["label"])
        if failed:
            text += "; %d row(s) failed" % len(failed)
        out.append((what, text, verdict(worst["ratio"] <= limit and not failed)))

    ratio_target("dmr pairs ≤ %.2f× raw, every size" % TARGET_RATIO, docs.get("dmr"), "pairs")
    ratio_target("dmr random workload ≤ %.2f× raw" % TARGET_RATIO, docs.get("dmr"), "random")
    ratio_target("dmr threads (1–16) ≤ %.2f× raw" % TARGET_RATIO, docs.get("dmr"), "threads")
    ratio_target("pinned pool pairs ≤ %.2f× raw, every size" % TARGET_RATIO, docs.get("pinned"),
                 "pairs")
    copy_rows = ok_rows(section(docs.get("pinned"), "copy"))
    if copy_rows:
        ratios = [(r["variants"]["raw"]["median"] / r["variants"]["memres"]["median"], r["label"])
                  for r in copy_rows]
        worst = min(ratios)
        out.append(("pinned copy ≥ %.2f× raw throughput" % TARGET_COPY,
                    "worst %.3f× (%s)" % worst, verdict(worst[0] >= TARGET_COPY)))
    else:
        out.append(("pinned copy ≥ %.2f× raw throughput" % TARGET_COPY, "not run", "–"))
    vmm = docs.get("vmm")
    ratio_target("vmm grow ≤ %.2f× raw, every chunk size" % TARGET_RATIO, vmm, "vmm_grow")
    if section(vmm, "lookup") is not None:
        ratio_target("memres_lookup ≤ %.2f× cuPointerGetAttribute (25× faster), 1 to 1024 "
                     "segments" % LOOKUP_RATIO, vmm, "lookup", limit=LOOKUP_RATIO)
    grow = ok_rows(section(vmm, "vmm_grow"))
    if grow:
        fast = [r for r in grow
                if grow_ms(vmm, r["variants"]["memres"]["median"]) <= TARGET_GROW_MS]
        if fast:
            best = min(fast, key=lambda r: r["size"])
            text = "smallest chunk meeting it: %s (%s ms/GiB); also %s" % (
                best["label"], fmt(grow_ms(vmm, best["variants"]["memres"]["median"])),
                ", ".join(r["label"] for r in fast if r is not best) or "no other")
        else:
            text = "no chunk size meets it (best %s ms/GiB)" % fmt(min(
                grow_ms(vmm, r["variants"]["memres"]["median"]) for r in grow))
        out.append(("1 GiB vmm grow ≤ %.0f ms (chunk choice)" % TARGET_GROW_MS, text,
                    verdict(bool(fast))))
    else:
        out.append(("1 GiB vmm grow ≤ %.0f ms (chunk choice)" % TARGET_GROW_MS, "not run", "–"))
    ratio_target("managed pool pairs ≤ %.2f× raw, every size" % TARGET_RATIO,
                 docs.get("managed"), "pairs")
    ratio_target("ipc import pool+first buffer ≤ %.2f× raw" % TARGET_RATIO, docs.get("ipc"),
                 "ipc_import", lambda r: r["label"].startswith("pool"))
    ratio_target("ipc per-buffer import ≤ %.2f× raw" % TARGET_RATIO, docs.get("ipc"),
                 "ipc_import", lambda r: r["label"].startswith("per buffer"))
    ratio_target("graph capture pairs ≤ %.2f× raw, every size" % TARGET_RATIO, docs.get("graph"),
                 "graph_capture")
    out += cache_targets(docs)
    out += arena_targets(docs)
    if peers:
        rows = [(r["label"], r["results"]) for r in peers["pairs"]]
        rows.append(("random", peers["random"]["results"]))
        present = [n for n in RIVALS
                   if any(p["name"] == n and p["available"] for p in peers["peers"])]
        losses = []
        for label, res in rows:
            behind = ahead(res)
            if behind is None:
                losses.append("%s: memres failed" % label)
            elif behind:
                losses.append("%s: %s" % (label, ", ".join(PEER_LABELS[n] for n in behind)))
        if not present:
            out.append(("memres ahead of cuda.core / PyTorch / CuPy, every row",
                        "no rival available", "–"))
        else:
            out.append(("memres ahead of %s, every row (Python, memres via ctypes)"
                        % " / ".join(PEER_LABELS[n] for n in present),
                        "behind on " + "; ".join(losses) if losses else "ahead on all %d rows"
                        % len(rows), verdict(not losses)))
        out += package_targets(peers, rows, present)
    else:
        out.append(("memres ahead of cuda.core / PyTorch / CuPy, every row", "not run", "–"))
    return out


def package_targets(peers, rows, present):
    """The Python package's targets (issue 36), for each of its peers that ran: ahead of the
    rivals in every row; at most PACKAGE_CUPY_RATIO x CuPy's pair up to the cache's max_block."""
    out = []
    for who in PACKAGE_PEERS:
        if not any(p["name"] == who and p["available"] for p in peers["peers"]):
            continue
        label = PEER_LABELS[who]
        losses = []
        for row_label, res in rows:
            behind = ahead(res, who)
            if behind is None:
                losses.append("%s: failed" % row_label)
            elif behind:
                losses.append("%s: %s" % (row_label, ", ".join(PEER_LABELS[n] for n in behind)))
        if present:
            out.append(("%s ahead of %s, every row" % (label, " / ".join(PEER_LABELS[n]
                                                                       for n in present)),
                        "behind on " + "; ".join(losses) if losses
                        else "ahead on all %d rows" % len(rows), verdict(not losses)))
        ratios, over = [], []
        for r in peers["pairs"]:
            mine = r["results"].get(who, {}).get("median")
            cupy = r["results"].get("cupy", {}).get("median")
            if r["size"] > PACKAGE_MAX_BLOCK or mine is None or not cupy:
                continue
            ratios.append(mine / cupy)
            if mine / cupy > PACKAGE_CUPY_RATIO:
                over.append("%s %.2f" % (r["label"], mine / cupy))
        if ratios:
            out.append(("%s pair <= %.1fx CuPy's, every size up to 64 MiB" % (label,
                                                                           PACKAGE_CUPY_RATIO),
                        "worst %.2fx" % max(ratios) + (" (over: %s)" % ", ".join(over)
                                                       if over else ""),
                        verdict(not over)))
    return out


def cache_targets(docs):
    """The cache adaptor's targets (issue 17)."""
    out = []
    cache, torch = docs.get("cache"), docs.get("torch")
    rows = ok_rows(section(cache, "pairs"))
    if rows:
        bad = [r for r in rows if r["ratio"] > CACHE_PAIR_RATIO
               or r["variants"]["memres"]["median"] > CACHE_PAIR_NS]
        worst = max(rows, key=lambda r: r["variants"]["memres"]["median"])
        out.append(("cache>dmr pair ≤ %.0f ns and ≤ 1/14 of the raw pool pair, every size"
                    % CACHE_PAIR_NS, "slowest %s ns (%s), worst ratio %.4f×" % (
                        fmt(worst["variants"]["memres"]["median"]), worst["label"],
                        max(r["ratio"] for r in rows)), verdict(not bad)))
    else:
        out.append(("cache>dmr pair ≤ %.0f ns and ≤ 1/14 of raw" % CACHE_PAIR_NS, "not run", "–"))
    if torch and torch.get("pairs"):
        worst = max(torch["pairs"], key=lambda r: r["ratio"])
        out.append(("cache>dmr ≥ %.0f× faster than PyTorch's C++ caching allocator, every size"
                    % CACHE_TORCH_SPEEDUP, "worst %.1f× (%s)" % (1 / worst["ratio"],
                                                              fmt_size(worst["size"])),
                    verdict(worst["ratio"] <= 1 / CACHE_TORCH_SPEEDUP)))
    else:
        out.append(("cache>dmr ≥ %.0f× faster than PyTorch's C++ caching allocator"
                    % CACHE_TORCH_SPEEDUP, (torch or {}).get("skipped", "not run"), "–"))
    threads = {r["threads"]: 1e3 / r["variants"]["memres"]["median"]
               for r in ok_rows(section(cache, "thread_pairs"))}
    if 1 in threads and 16 in threads:
        scale = threads[16] / threads[1]
        out.append(("cache>dmr 16 threads ≥ %.0f× the 1-thread aggregate pairs/s"
                    % CACHE_THREAD_SCALING, "%.1f× (%.3g → %.3g M pairs/s%s)" % (
                        scale, threads[1], threads[16],
                        ceiling_scaling(section(cache, "thread_pairs"))),
                    verdict(scale >= CACHE_THREAD_SCALING)))
    else:
        out.append(("cache>dmr 16 threads ≥ %.0f× 1 thread" % CACHE_THREAD_SCALING, "not run",
                    "–"))
    rows = ok_rows(section(cache, "random"))
    if rows:
        r = rows[0]
        out.append(("cache>dmr random workload ≤ 1/10 of the raw pool per operation",
                    "%.4f×" % r["ratio"], verdict(r["ratio"] <= CACHE_RANDOM_RATIO)))
        if r.get("peak_requested"):
            peak = r["peak_reserved"] / r["peak_requested"]
            out.append(("cache>dmr random: peak reserved ≤ %.1f× peak used" % CACHE_PEAK_RATIO,
                        "%.3f× (%.0f MiB / %.0f MiB)" % (peak, r["peak_reserved"] / 2 ** 20,
                                                        r["peak_requested"] / 2 ** 20),
                        verdict(peak <= CACHE_PEAK_RATIO)))
    return out


def arena_targets(docs):
    """The arena kind's micro targets (issue 38, target 5). Its own pair rows compare it with a
    raw VMM pair (what the driver says its memory is); the target is against the raw pool pair,
    which is dmr's step's raw variant at the same size, in the same run."""
    out = []
    arena = docs.get("arena")
    raw = {r["size"]: r["variants"]["raw"]["median"]
           for r in ok_rows(section(docs.get("dmr"), "pairs")) if "raw" in r["variants"]}
    rows = [r for r in ok_rows(section(arena, "pairs"))
            if 0 < r["size"] <= ARENA_MAX_BLOCK and r["size"] in raw]
    what = "arena pair ≥ 14× faster than the raw pool pair, every size up to 64 KiB"
    if rows:
        ratios = {r["label"]: r["variants"]["memres"]["median"] / raw[r["size"]] for r in rows}
        worst = max(ratios, key=ratios.get)
        out.append((what, "worst %.1f× faster (%s: %s ns against %s)" % (
            1 / ratios[worst], worst,
            fmt(next(r for r in rows if r["label"] == worst)["variants"]["memres"]["median"]),
            fmt(raw[next(r for r in rows if r["label"] == worst)["size"]])),
            verdict(ratios[worst] <= ARENA_PAIR_RATIO)))
    else:
        out.append((what, "not run", "–"))
    threads = {r["threads"]: 1e3 / r["variants"]["memres"]["median"]
               for r in ok_rows(section(arena, "thread_pairs"))}
    if 1 in threads and 16 in threads:
        scale = threads[16] / threads[1]
        out.append(("arena 16 threads ≥ %.0f× the 1-thread aggregate pairs/s"
                    % ARENA_THREAD_SCALING, "%.1f× (%.3g → %.3g M pairs/s%s)" % (
                        scale, threads[1], threads[16],
                        ceiling_scaling(section(arena, "thread_pairs"))),
                    verdict(scale >= ARENA_THREAD_SCALING)))
    else:
        out.append(("arena 16 threads ≥ %.0f× 1 thread" % ARENA_THREAD_SCALING, "not run", "–"))
    rows = ok_rows(section(arena, "random"))
    if rows and rows[0].get("peak_requested"):
        r = rows[0]
        peak = r["peak_reserved"] / r["peak_requested"]
        out.append(("arena random: peak reserved ≤ %.2f× peak used" % ARENA_PEAK_RATIO,
                    "%.3f× (%.0f MiB / %.0f MiB)" % (peak, r["peak_reserved"] / 2 ** 20,
                                                    r["peak_requested"] / 2 ** 20),
                    verdict(peak <= ARENA_PEAK_RATIO)))
    else:
        out.append(("arena random: peak reserved ≤ %.2f× peak used" % ARENA_PEAK_RATIO,
                    "not run", "–"))
    return out


def torch_table(torch):
    lines = ["PyTorch %s, `c10::cuda::CUDACachingAllocator::raw_alloc_with_stream` + `raw_delete`, "
             "against `%s` in the same process (bench/torch-bench.sh); median [IQR] of %d paired "
             "repetitions." % (torch["torch_version"], torch["memres_spec"], torch["repetitions"]),
             "", "| size | torch ns/pair | memres ns/pair | memres/torch | ≥ %.0f× faster |"
             % CACHE_TORCH_SPEEDUP, "|---|---:|---:|---:|:-:|"]
    for r in torch["pairs"]:
        lines.append("| %s | %s | %s | %.4f× [%.4f–%.4f] | %s |" % (
            fmt_size(r["size"]), iqr(r["torch"]), iqr(r["memres"]), r["ratio"], r["ratio_q1"],
            r["ratio_q3"], "yes" if r["ratio"] <= 1 / CACHE_TORCH_SPEEDUP else "no"))
    lines += ["", "| threads (4 KiB pairs, a stream each) | torch M pairs/s | memres M pairs/s |",
              "|---|---:|---:|"]
    for r in torch["threads"]:
        lines.append("| %d | %s | %s |" % (r["threads"], fmt(r["torch_pairs_per_s"]["median"] / 1e6),
                                          fmt(r["memres_pairs_per_s"]["median"] / 1e6)))
    return lines


# ---- the plot ----------------------------------------------------------------------------------


def plot(docs, peers, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return "no plot: %s" % e
    fig, ax = plt.subplots(figsize=(10, 5))
    dmr_rows = ok_rows(section(docs.get("dmr"), "pairs"))
    if dmr_rows:
        xs = [r["size"] for r in dmr_rows]
        ax.plot(xs, [r["variants"]["memres"]["median"] for r in dmr_rows], "o-", lw=2,
                label="memres dmr (C)")
        ax.plot(xs, [r["variants"]["raw"]["median"] for r in dmr_rows], "s--", lw=2,
                label="raw driver (C)")
    for name in (p["name"] for p in (peers or {}).get("peers", []) if p["available"]):
        pts = [(r["size"], r["results"][name]["median"]) for r in peers["pairs"]
               if "median" in r["results"].get(name, {})]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".-" if name != "python" else ":",
                    label=PEER_LABELS.get(name, name) + " (Python)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    sizes = sorted({r["size"] for r in dmr_rows} | {r["size"] for r in (peers or {}).get("pairs", [])})
    if sizes:
        ax.set_xticks(sizes)
        ax.set_xticklabels([fmt_size(n) for n in sizes])
        ax.minorticks_off()
    ax.set_xlabel("allocation size (bytes)")
    ax.set_ylabel("allocate + free, ns per pair (median)")
    gpu = (docs.get("dmr") or {}).get("gpu", "")
    ax.set_title("Allocation latency by size %s" % ("on " + gpu if gpu else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


# ---- the document ------------------------------------------------------------------------------


def render(docs, errors, peers, peers_error, steps, args, plot_note):
    first = next((d for d in (docs.get(k) for k in KINDS) if d), {})
    quick = any(d.get("quick") for d in docs.values() if d) or (peers or {}).get("quick")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    drv = first.get("driver_version")
    lines = ["# memres benchmark results", ""]
    if quick:
        lines += ["> **Quick run** (`--quick`, possibly against the fake driver): the numbers below "
                  "prove that the harness runs and mean nothing.", ""]
    lines += [
        "| | |", "|---|---|",
        "| date | %s |" % now,
        "| GPU | %s (device %s) |" % (first.get("gpu", "unknown"), first.get("device", "?")),
        "| driver | %s%s (%s) |" % (drv, " = CUDA %d.%d" % (drv // 1000, drv % 1000 // 10)
                                     if isinstance(drv, int) else "", first.get("driver_path")),
        "| memres | %s |" % first.get("memres_version", "?"),
        "| host | %s, Python %s |" % (socket.gethostname(), platform.python_version()),
        "", "## How it was made", "",
        "One command on the GPU machine after the build:", "", "    " + args.run_all, "",
        "which ran (exit status, seconds):", "", "| step | command | exit | s |", "|---|---|--:|--:|"]
    for s in steps:
        lines.append("| %s | `%s` | %d%s | %d |" % (s["name"], s["command"], s["rc"],
                                                     " (time limit)" if s["rc"] in (124, 137)
                                                     else "", s["seconds"]))
    for k in KINDS:
        if k not in docs and not any(s["name"] == k for s in steps):
            lines.append("| %s | (kind not built: skipped) | | |" % k)
    lines += ["", "Method: memres and the raw driver run in one process on one non-blocking "
              "stream, on the same pool (the raw loop uses the pool the resource's buffers come "
              "from, found with CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE). A repetition runs N "
              "iterations (N scaled so it lasts about %s ms) and ends with a stream "
              "synchronize; repetitions of memres and raw alternate (A B B A …) after a warm-up; "
              "cells give the median [interquartile range] of R = %s repetitions. Ratio: the median "
              "over the repetitions of memres's time / raw's time in the same repetition (they "
              "run back to back, so a shift of the machine's speed falls on both); its quartiles "
              "in brackets (for copies: memres GB/s / raw GB/s)."
              % (first.get("target_ms", "?"), first.get("repetitions", "?")), ""]

    lines += ["## Targets", "", "| target | measured | met |", "|---|---|:-:|"]
    for what, text, ok in target_rows(docs, peers):
        lines.append("| %s | %s | %s |" % (what, text, ok))
    lines.append("")

    for kind in KINDS:
        doc = docs.get(kind)
        if doc is None:
            if kind in errors:
                lines += ["## %s" % kind, "", "No result: %s (see bench.log)." % errors[kind], ""]
            continue
        lines += ["## %s (`%s`)" % (kind, doc.get("resource", doc.get("spec"))), ""]
        for sec in doc["sections"]:
            lines += ["### %s" % sec["title"], "", "Raw: %s." % sec["raw"], ""]
            if sec.get("note"):
                lines += ["%s." % sec["note"], ""]
            if sec["name"] == "copy":
                lines += copy_table(sec)
            elif sec["name"] == "vmm_grow":
                lines += time_table(sec, "chunk", "ms/GiB", 1e-6 / (doc["grow_size"] / GIB))
            elif sec["name"] == "thread_pairs":
                lines += time_table(sec, "threads", "ns/pair", target=None, extra=(
                    "M pairs/s memres / raw", lambda r: "%.3g / %.3g" % (
                        1e3 / r["variants"]["memres"]["median"],
                        1e3 / r["variants"]["raw"]["median"])))
            elif sec["name"] == "threads":
                lines += time_table(sec, "threads", "ns/op", extra=(
                    "Mops/s memres / raw", lambda r: "%.3g / %.3g" % (
                        1e3 / r["variants"]["memres"]["median"],
                        1e3 / r["variants"]["raw"]["median"])))
            else:
                lines += time_table(sec, "size" if sec["name"] in ("pairs", "graph_capture", "alternating",
                                                                   "core")
                                    else "workload", sec["unit"],
                                    target=SECTION_TARGETS.get((kind, sec["name"]), TARGET_RATIO))
            notes = ["%s: %s" % (r["label"], r["note"]) for r in sec["rows"] if r.get("note")]
            if notes:
                lines += [""] + ["- " + n for n in notes]
            lines.append("")

    torch = docs.get("torch")
    if torch is not None:
        lines += ["## PyTorch's C++ caching allocator against cache>dmr", ""]
        lines += (torch_table(torch) if torch.get("pairs")
                  else ["Not measured: %s." % torch.get("skipped", "no result")])
        lines.append("")
    lines += ["## Peers (Python, ns per pair; last row ns per operation)", ""]
    if peers is None:
        lines += ["No result: %s (see bench.log)." % peers_error, ""]
    else:
        lines += ["Every peer timed the same way from Python (`bench/peers.py`, time.perf_counter_ns "
                  "around loops of N pairs, median of R = %d interleaved repetitions); memres runs "
                  "through ctypes, so its Python column carries ctypes' per-call cost, which the C "
                  "columns (from memres-bench) do not. The Python floor is an empty loop making two "
                  "no-op calls per pair. \"memres ahead\" compares memres (ctypes) with cuda.core, "
                  "PyTorch and CuPy. memres spec: `%s`." % (peers["repetitions"],
                                                             peers["memres_spec"]), ""]
        for p in peers["peers"]:
            lines.append("- %s: %s" % (PEER_LABELS.get(p["name"], p["name"]),
                                       p["version"] if p["available"] else "n/a (%s)"
                                       % p["reason"]))
        lines += [""] + peers_table(peers, docs.get("dmr")) + [""]
        errs = ["%s %s: %s" % (r.get("label", "random"), n, v["error"])
                for r in peers["pairs"] + [peers["random"]] for n, v in r["results"].items()
                if "error" in v]
        if errs:
            lines += ["Errors:", ""] + ["- " + e for e in errs] + [""]
    lines += ["## Plot", "", "![allocation latency by size](latency.png)" if plot_note is None
              else "(%s)" % plot_note, ""]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="directory with KIND.json, peers.json, steps.tsv")
    p.add_argument("--output", required=True, help="directory for RESULTS.md, latency.png, "
                   "bench-raw.json")
    p.add_argument("--copy-to", help="also copy RESULTS.md and latency.png here (bench/)")
    p.add_argument("--run-all", default="bench/run-all.sh BUILD OUT",
                   help="the command line to record")
    args = p.parse_args()

    steps = read_steps(os.path.join(args.input, "steps.tsv"))
    ran = {s["name"] for s in steps}
    docs, errors = {}, {}
    for kind in KINDS:
        if steps and kind not in ran:
            continue
        doc, err = load(os.path.join(args.input, kind + ".json"))
        if doc is not None:
            docs[kind] = doc
        elif kind in ran or not steps:
            errors[kind] = err
    peers, peers_error = load(os.path.join(args.input, "peers.json"))
    if "torch" in ran or not steps:
        torch, _ = load(os.path.join(args.input, "torch.json"))
        if torch is not None:
            docs["torch"] = torch

    os.makedirs(args.output, exist_ok=True)
    png = os.path.join(args.output, "latency.png")
    plot_note = plot(docs, peers, png)
    text = render(docs, errors, peers, peers_error, steps, args, plot_note)
    md = os.path.join(args.output, "RESULTS.md")
    with open(md, "w") as f:
        f.write(text)
    with open(os.path.join(args.output, "bench-raw.json"), "w") as f:
        json.dump({"bench": docs, "peers": peers, "steps": steps, "errors": errors,
                   "peers_error": peers_error}, f, indent=1)
    if args.copy_to:
        shutil.copy(md, os.path.join(args.copy_to, "RESULTS.md"))
        if plot_note is None:
            shutil.copy(png, os.path.join(args.copy_to, "latency.png"))
    print("report.py: wrote %s%s" % (md, "" if plot_note is None else " (%s)" % plot_note),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
