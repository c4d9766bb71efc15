#!/usr/bin/env python3
"""A `log` trace replayed through the allocator shim, the path torch takes, repetition after
repetition, with what each repetition made the resource do.

  bench/shim-replay.py [--threads] [--reps N] [--json FILE] TRACE

Each repetition replays the whole trace (bench/traces/*.csv, the `log` adaptor's CSV) from an
empty resource: memres_torch_alloc() and memres_torch_free() of libmemres-allocator in the
trace's order, on the legacy stream (torch's default stream), then frees what the trace left
live. With --threads each line runs on a thread of its own for its Thread column (torch's forward
allocates on the main thread and its backward frees on the autograd thread), the threads taking
turns in the trace's order; without it every line runs on one thread. After each repetition the
resource's counters (memres_resource_get_counters() down the stack: granules created and
remapped, settles, park hits and flushes, cache hits and misses, physical bytes) are printed as
the difference from the repetition before. A resource that has found its layout does the same
work every repetition from the second on, and maps nothing.

Environment: MEMRES_ALLOCATOR_RESOURCE (the shim's spec), MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES,
MEMRES_PLUGIN_PATH; on the fake driver MEMRES_CUDA_DRIVER and FAKECUDA_DEVICE_MEMORY large enough
for the trace (the fake backs memory lazily)."""

import argparse
import csv
import ctypes
import json
import os
import queue
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "interop"))
sys.path.insert(0, HERE)

import interop  # noqa: E402  (bench/interop.py: layer_counters())

LEGACY = ctypes.c_void_p(1)  # CU_STREAM_LEGACY
COUNTED = interop.COUNTED + ("physical", "granules_refaulted", "headroom")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--threads", action="store_true", help="each line on its Thread's thread")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--json")
    args = ap.parse_args()

    from memres_interop import Allocator
    alloc = Allocator()
    lib = alloc.lib
    lib.memres_torch_alloc.restype = ctypes.c_void_p
    lib.memres_torch_alloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    lib.memres_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
                                      ctypes.c_void_p]
    with open(args.trace, newline="") as f:
        ops = [(r["Thread"], r["Action"], int(r["Pointer"], 16), int(r["Size"]))
               for r in csv.DictReader(f) if r["Action"] in ("allocate", "free")]
    tids = sorted({op[0] for op in ops})
    live = {}

    def run(op):
        _, action, ptr, size = op
        if action == "allocate":
            p = lib.memres_torch_alloc(size, 0, LEGACY)
            if not p:
                raise SystemExit(f"allocation of {size} bytes failed")
            live[ptr] = (p, size)
        elif ptr in live:
            p, size = live.pop(ptr)
            lib.memres_torch_free(p, size, 0, LEGACY)

    # one worker a thread of the trace; the main thread hands each line to its worker and waits
    inbox = {t: queue.Queue() for t in tids}
    done = threading.Semaphore(0)

    def worker(t):
        while (op := inbox[t].get()) is not None:
            run(op)
            done.release()

    workers = [threading.Thread(target=worker, args=(t,)) for t in tids]
    for w in workers:
        w.start()
    rows = []
    before = interop.layer_counters(alloc, COUNTED)
    for rep in range(args.reps):
        for op in ops:
            inbox[op[0] if args.threads else tids[0]].put(op)
            done.acquire()
        for ptr in list(live):  # what the trace left live
            inbox[tids[0]].put((tids[0], "free", ptr, 0))
            done.acquire()
        now = interop.layer_counters(alloc, COUNTED)
        delta = {k: now.get(k, 0) - before.get(k, 0) for k in COUNTED
                 if now.get(k, 0) != before.get(k, 0)}
        rows.append(delta)
        print(rep, json.dumps(delta), flush=True)
        before = now
    for t in tids:
        inbox[t].put(None)
    for w in workers:
        w.join()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"trace": args.trace, "threads": args.threads,
                       "spec": os.environ.get("MEMRES_ALLOCATOR_RESOURCE"), "reps": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
