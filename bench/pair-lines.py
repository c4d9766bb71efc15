#!/usr/bin/env python3
"""The memory an allocate+close pair writes, and what of it the threads share, by valgrind's lackey.

`bench/pair-lines.c` (compiled here with `cc`) runs T threads of pairs through one spec on the
tree's fake driver (device specs) or none (host specs), each thread on a stream of its own: every
thread warms up, then each in turn runs N pairs alone between two marker calls while the others
wait. Under `valgrind --tool=lackey --trace-mem=yes` every load and store is traced; this script
splits the trace at the markers and, per thread, counts its stores per pair outside its own stack
and static TLS (the mapping holding its stack) by source line (addr2line), and finds the 64-byte
lines (`--line 128`: the pairs of lines x86's adjacent-line prefetcher fetches together) that one
thread's pairs write and another thread's pairs read or write: a line written on
one core and touched on another moves between their caches at every pair (a shared counter, a
refcount, false sharing of neighbouring per-thread data). Instructions, not time: no GPU needed.

    bench/pair-lines.py --build build --spec arena --size 4096 --threads 2

`--bench`: the threads set up and looping as memres-bench's --thread-pairs workers (pair-lines.c
says how: the context made current on each, the bench's per-thread state in one array, each
thread's pairs in 5 repetitions ended by a stream synchronization and a clock read); what the
bench does once a repetition is then in the traced window, counted per pair.

Exit 0; prints a Markdown report (`--json`: the figures). With `--fail-on-shared`, exit 1 when
any line is shared (a check for CI or a bisect).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

from buildtree import plugin_path

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_driver(tmp):
    exe = os.path.join(tmp, "pair-lines")
    subprocess.run(["cc", "-O2", "-g", "-o", exe, os.path.join(HERE, "pair-lines.c"),
                    os.path.join(HERE, "dlopen-count.c"), "-ldl", "-lpthread"], check=True)
    return exe


class Maps:
    """The process's mappings, as pair-lines printed them."""

    def __init__(self, lines):
        self.maps = []
        for line in lines:
            f = line.split(None, 5)
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            self.maps.append((lo, hi, int(f[2], 16), f[5].strip() if len(f) > 5 else ""))
        self.base = {}
        for lo, hi, off, path in self.maps:
            if path.startswith("/") and (path not in self.base or lo < self.base[path]):
                self.base[path] = lo

    def find(self, addr):
        for m in self.maps:
            if m[0] <= addr < m[1]:
                return m
        return None

    def describe(self, addr):
        m = self.find(addr)
        if m is None:
            return "unmapped"
        name = os.path.basename(m[3]) if m[3] else "anonymous"
        return f"{name}+{addr - m[0]:#x}"


def resolve(maps, addrs):
    """instruction address -> 'function file:line < its callers' (addr2line -i: the innermost
    inlined frame first)."""
    by_path = collections.defaultdict(list)
    out = {}
    for a in addrs:
        m = maps.find(a)
        if m is None or not m[3].startswith("/"):
            out[a] = f"{a:#x}"
        else:
            by_path[m[3]].append(a)
    for path, group in by_path.items():
        base = maps.base[path]
        # -a: each address's frames follow a line with the address itself
        res = subprocess.run(["addr2line", "-a", "-f", "-i", "-e", path]
                             + [f"{a - base:#x}" for a in group], capture_output=True, text=True)
        frames, i = {}, -1
        lines = res.stdout.splitlines()
        k = 0
        while k < len(lines):
            if lines[k].startswith("0x"):
                i += 1
                frames[group[i]] = []
                k += 1
                continue
            fn, loc = lines[k], lines[k + 1] if k + 1 < len(lines) else "??"
            frames[group[i]].append(f"{fn} {os.path.basename(loc.split(' ')[0])}")
            k += 2
        for a in group:
            out[a] = " < ".join(frames.get(a, [])) or f"{a:#x}"
    return out


def trace(exe, build, spec, size, warm, n, threads, line_bytes, tmp, bench=False):
    env = dict(os.environ, MEMRES_PLUGIN_PATH=plugin_path(build))
    env.pop("MEMRES_CUDA_DRIVER", None)
    if "host" not in spec.split(">")[-1]:
        env["MEMRES_CUDA_DRIVER"] = os.path.join(build, "tests", "fakecuda", "libfakecuda.so")
    log = os.path.join(tmp, "lackey.txt")
    cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-file=" + log, exe,
           os.path.join(build, "core", "libmemres.so"), spec, str(size), str(warm), str(n),
           str(threads)] + (["bench"] if bench else [])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"pair-lines: {' '.join(cmd)} failed: {res.stderr[-2000:]}")
    info = res.stdout.splitlines()
    begin = int(next(l for l in info if l.startswith("begin ")).split()[1], 16)
    end = int(next(l for l in info if l.startswith("end ")).split()[1], 16)
    stacks = {int(l.split()[1]): int(l.split()[2], 16) for l in info if l.startswith("stack ")}
    maps = Maps([l[4:] for l in info if l.startswith("map ")])
    private = {}
    for t, sp in stacks.items():
        m = maps.find(sp)
        private[t] = (m[0], m[1]) if m else (sp - (8 << 20), sp + (1 << 16))
    # per phase (thread): stores by (instruction, line), loads by line, instruction count
    stores = [collections.Counter() for _ in range(threads)]
    touched = [collections.defaultdict(set) for _ in range(threads)]  # line -> instructions
    written = [collections.defaultdict(set) for _ in range(threads)]
    instrs = [0] * threads
    phase, seen, ip = None, 0, 0
    begin_line = f"I  {begin:08x},"  # lackey's format: outside the phases, only this is looked for
    with open(log) as f:
        for line in f:
            if phase is None and not line.startswith(begin_line):
                continue
            c = line[0:2]
            if c == "I ":
                ip = int(line[3:].split(",")[0], 16)
                if ip == begin:
                    phase, seen = seen, seen + 1
                elif ip == end:
                    phase = None
                elif phase is not None:
                    instrs[phase] += 1
                continue
            if phase is None or c != " S" and c != " L" and c != " M":
                continue
            addr = int(line[3:].split(",")[0], 16)
            lo, hi = private[phase]
            if lo <= addr < hi:
                continue
            ln = addr // line_bytes * line_bytes
            touched[phase][ln].add(ip)
            if c != " L":
                stores[phase][(ip, ln)] += 1
                written[phase][ln].add(ip)
    return maps, stores, touched, written, instrs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", required=True, help="the build tree")
    ap.add_argument("--spec", default="arena")
    ap.add_argument("--size", type=int, default=4096, help="bytes per allocation (4096)")
    ap.add_argument("--threads", type=int, default=2, help="threads (2)")
    ap.add_argument("--warm", type=int, default=200, help="warm-up pairs per thread (200)")
    ap.add_argument("--n", type=int, default=500, help="measured pairs per thread (500)")
    ap.add_argument("--line", type=int, default=64,
                    help="bytes of a line (64; 128: the pairs x86's adjacent-line prefetcher "
                    "fetches together)")
    ap.add_argument("--bench", action="store_true",
                    help="set up and loop as memres-bench --thread-pairs does")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--fail-on-shared", action="store_true")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = compile_driver(tmp)
        maps, stores, touched, written, instrs = trace(exe, ns.build, ns.spec, ns.size, ns.warm,
                                                       ns.n, ns.threads, ns.line, tmp,
                                                       ns.bench)
        ips = {ip for s in stores for ip, _ in s} | {ip for t in touched for v in t.values()
                                                     for ip in v}
        where = resolve(maps, ips)  # while the driver's binary exists: its lines too
    # shared: a line written in one phase and touched in another
    shared = {}
    for a in range(ns.threads):
        for b in range(ns.threads):
            if a == b:
                continue
            for ln in written[a].keys() & touched[b].keys():
                e = shared.setdefault(ln, {"writers": set(), "others": set(), "threads": set()})
                e["writers"] |= {where[i] for i in written[a][ln]}
                e["others"] |= {where[i] for i in touched[b][ln]}
                e["threads"] |= {a, b}
    # the last thread's stores per pair, by source (the others ran theirs before it)
    last = ns.threads - 1
    by_source = collections.Counter()
    lines_of = collections.defaultdict(set)
    for (ip, ln), k in stores[last].items():
        by_source[where[ip]] += k
        lines_of[where[ip]].add(ln)
    per_pair = sum(stores[last].values()) / ns.n
    if ns.json:
        json.dump({"spec": ns.spec, "size": ns.size, "threads": ns.threads, "bench": ns.bench,
                   "instructions_per_pair": [i / ns.n for i in instrs],
                   "stores_per_pair": per_pair,
                   "stores": {k: v / ns.n for k, v in by_source.items()},
                   "shared_lines": [{"line": maps.describe(ln), "writers": sorted(e["writers"]),
                                     "others": sorted(e["others"])}
                                    for ln, e in sorted(shared.items())]},
                  sys.stdout, indent=1)
        print()
    else:
        print(f"`{ns.spec}`, {ns.size} B, {ns.threads} threads, {ns.n} pairs each after "
              f"{ns.warm}{' (as memres-bench --thread-pairs)' if ns.bench else ''}: instructions per pair (traced, the loop's included) "
              + ", ".join(f"{i / ns.n:g}" for i in instrs))
        print(f"\nstores per pair of thread {last} outside its stack and TLS: {per_pair:g}\n")
        print("| stores / pair | lines | where (innermost frame < callers) |")
        print("|---|---|---|")
        for src, k in by_source.most_common():
            print(f"| {k / ns.n:g} | {len(lines_of[src])} | {src} |")
        print(f"\n{ns.line}-byte lines written by one thread's pairs and touched by another's: "
              f"{len(shared)}\n")
        for ln, e in sorted(shared.items()):
            print(f"- {maps.describe(ln)} (threads {sorted(e['threads'])})")
            for w in sorted(e["writers"]):
                print(f"  - written: {w}")
            for o in sorted(e["others"] - e["writers"]):
                print(f"  - touched: {o}")
    return 1 if ns.fail_on_shared and shared else 0


if __name__ == "__main__":
    sys.exit(main())
