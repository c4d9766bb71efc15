#!/usr/bin/env python3
"""The bytes a snapshot cannot attribute, for a PyTorch model through the shim (issue 35's GPU
target): torch allocates through libmemres-allocator (MEMRES_ALLOCATOR_RESOURCE=SPEC) and
bench/workloads.py's transformer trains for --steps steps; then

  process      = the device's used bytes by cuMemGetInfo (total - free) now, less the same right
                 after the context was created (before any allocation);
  attributed   = the snapshot's reserved bytes (memres_allocator_write_snapshot(), the summary's
                 `reserved` of each device: what the stack holds from the driver);
  unattributed = process - attributed, which the target holds to at most --limit percent
                 (default 2) of process.

Printed as one JSON line, with what each layer of the snapshot says it cannot see (`unseen`).
The snapshot is left in --snapshot FILE (default unattributed-snapshot.json), for `memres view`.
Run it alone on the GPU: cuMemGetInfo counts every process's memory. Exit status 0 when the
target is met, 1 when not, 77 without torch or a device.

  bench/unattributed.py [--spec 'cache>dmr:device=0'] [--steps 10] [--seed 35] [--limit 2]

Environment as bench/workloads.py (MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES, MEMRES_PLUGIN_PATH:
scripts/gpu-run --interop sets them)."""

import argparse
import ctypes
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="cache>dmr:device=0")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--limit", type=float, default=2.0, help="percent of the process's bytes")
    ap.add_argument("--snapshot", default="unattributed-snapshot.json")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("unattributed: no torch", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("unattributed: no device", file=sys.stderr)
        return 77

    os.environ["MEMRES_ALLOCATOR_RESOURCE"] = args.spec
    from memres_interop import Allocator, GError
    from workloads import Sampler, run_train

    alloc = Allocator()
    torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
        alloc.path, "memres_torch_alloc", "memres_torch_free"))
    torch.cuda.init()
    free0, total = torch.cuda.mem_get_info()  # the context exists now; nothing is allocated

    sampler = Sampler(torch)
    torch.manual_seed(args.seed)
    run_train(torch, args, sampler, random.Random(args.seed))
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info()

    lib, err = alloc.lib, ctypes.POINTER(GError)()
    lib.memres_allocator_write_snapshot.restype = ctypes.c_int
    lib.memres_allocator_write_snapshot.argtypes = [ctypes.c_char_p,
                                                    ctypes.POINTER(ctypes.POINTER(GError))]
    if not lib.memres_allocator_write_snapshot(args.snapshot.encode(), ctypes.byref(err)):
        sys.exit("memres_allocator_write_snapshot: " + err.contents.message.decode())
    with open(args.snapshot) as f:
        doc = json.load(f)

    process = free0 - free1
    attributed = sum(s["summary"]["reserved"] or 0 for s in doc["devices"].values())
    unattributed = process - attributed
    pct = 100.0 * unattributed / process if process > 0 else 0.0
    unseen = {"%s/%d %s" % (dev, l["position"], l["kind"]): l["unseen"]
              for dev, s in doc["devices"].items() for l in s["layers"] if l["unseen"]}
    out = {"spec": args.spec, "steps": args.steps, "device_total": total,
           "process_bytes": process, "attributed_bytes": attributed,
           "unattributed_bytes": unattributed, "unattributed_percent": round(pct, 3),
           "limit_percent": args.limit, "met": pct <= args.limit, "unseen": unseen,
           "snapshot": args.snapshot}
    print(json.dumps(out), flush=True)
    return 0 if pct <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
