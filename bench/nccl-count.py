#!/usr/bin/env python3
"""NCCL registrations of a PyTorch model running through the shim (issue 37, part 2): torch
allocates through libmemres-allocator (MEMRES_ALLOCATOR_RESOURCE=SPEC), a registrar
(memres_nccl_registrar_new, memres-nccl.h) registers the resource's segments with a one-rank
NCCL communicator, and bench/workloads.py's transformer trains for --steps steps. Printed, as
one JSON line: the most tensors (memres buffers) live at once, against the registrations NCCL
received (total, most at once, at the end) and the failures; then an all-reduce of a tensor
through registered memory, its values checked.

  bench/nccl-count.py [--spec 'cache>dmr:device=0'] [--steps 10] [--seed 38]

The spec needs segment events: cache over anything, vmm (one segment per tensor there).

NCCL: MEMRES_NCCL_LIBRARY, else torch's wheel (site-packages/nvidia/nccl/lib/libnccl.so.2).
Environment as bench/workloads.py (MEMRES_ALLOCATOR_LIB, MEMRES_LIBMEMRES, MEMRES_PLUGIN_PATH:
scripts/gpu-run --interop sets them). Exits 77 without torch, a device or NCCL."""

import argparse
import ctypes
import glob
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interop"))


class Counts(ctypes.Structure):  # MemresNcclCounts
    _fields_ = [(n, ctypes.c_uint64) for n in ("registered", "registered_bytes", "registrations",
                                               "deregistrations", "failures")]


def find_nccl(torch):
    path = os.environ.get("MEMRES_NCCL_LIBRARY")
    if path:
        return path
    site = os.path.dirname(os.path.dirname(torch.__file__))
    found = glob.glob(os.path.join(site, "nvidia", "nccl", "lib", "libnccl.so*"))
    return found[0] if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="cache>dmr:device=0")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=38)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("nccl-count: no torch", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("nccl-count: no device", file=sys.stderr)
        return 77
    nccl_path = find_nccl(torch)
    if nccl_path is None:
        print("nccl-count: no libnccl.so.2 (set MEMRES_NCCL_LIBRARY)", file=sys.stderr)
        return 77
    os.environ["MEMRES_NCCL_LIBRARY"] = nccl_path  # memres opens the same file

    os.environ["MEMRES_ALLOCATOR_RESOURCE"] = args.spec
    from memres_interop import Allocator, GError, Memres
    from workloads import run_train
    alloc, memres = Allocator(), Memres()
    torch.cuda.memory.change_current_allocator(torch.cuda.memory.CUDAPluggableAllocator(
        alloc.path, "memres_torch_alloc", "memres_torch_free"))
    torch.cuda.init()

    vp = ctypes.c_void_p
    nccl = ctypes.CDLL(nccl_path)
    comm, dev = vp(), ctypes.c_int(0)
    r = nccl.ncclCommInitAll(ctypes.byref(comm), 1, ctypes.byref(dev))
    if r != 0:
        sys.exit(f"ncclCommInitAll: {r}")

    lib, err = memres.lib, ctypes.POINTER(GError)()
    lib.memres_nccl_registrar_new.restype = vp
    lib.memres_nccl_registrar_new.argtypes = [vp, vp, ctypes.POINTER(ctypes.POINTER(GError))]
    lib.memres_nccl_registrar_get_counts.argtypes = [vp, ctypes.POINTER(Counts)]
    lib.memres_nccl_registrar_free.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(GError))]
    torch.empty(1, device="cuda")  # the resource exists once torch allocated
    reg = lib.memres_nccl_registrar_new(alloc.resource(0), comm, ctypes.byref(err))
    if not reg:
        sys.exit("memres_nccl_registrar_new: " + err.contents.message.decode())

    def counts():
        c = Counts()
        lib.memres_nccl_registrar_get_counts(reg, ctypes.byref(c))
        return c

    class Sampler:  # called by run_train after each forward, backward and step
        most_buffers = most_registered = 0

        def sample(self):
            self.most_buffers = max(self.most_buffers, alloc.count_buffers(0))
            self.most_registered = max(self.most_registered, counts().registered)

    sampler = Sampler()
    torch.manual_seed(args.seed)
    run_train(torch, args, sampler, random.Random(args.seed))
    torch.cuda.synchronize()
    sampler.sample()

    # an all-reduce (sum, one rank: the input) through registered memory
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream().cuda_stream
    r = nccl.ncclAllReduce(vp(x.data_ptr()), vp(y.data_ptr()), ctypes.c_size_t(x.numel()), 7, 0,
                           comm, vp(stream))
    torch.cuda.synchronize()
    reduced_ok = r == 0 and torch.equal(x, y)

    c = counts()
    out = {"spec": args.spec, "steps": args.steps, "most_tensors_live": sampler.most_buffers,
           "registrations": c.registrations, "deregistrations": c.deregistrations,
           "most_registered": sampler.most_registered, "registered_at_end": c.registered,
           "registered_bytes_at_end": c.registered_bytes, "failures": c.failures,
           "all_reduce_ok": reduced_ok}
    print(json.dumps(out), flush=True)
    del x, y
    if not lib.memres_nccl_registrar_free(reg, ctypes.byref(err)):
        print("memres_nccl_registrar_free: " + err.contents.message.decode(), file=sys.stderr)
    nccl.ncclCommDestroy(comm)
    return 0 if reduced_ok and c.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
