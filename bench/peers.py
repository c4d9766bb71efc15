#!/usr/bin/env python3
"""Peers: the allocate+close pair workload (a) and the random workload (b) of memres-bench,
through the allocators users compare memres with, all timed the same way from Python:

  memres        libmemres through ctypes (memres_resource_allocate, memres_buffer_close,
                memres_buffer_unref), on a non-blocking stream made through memres's driver table
  memres-py     the Python package (import memres: Resource.allocate, Buffer.close) with
                --package-spec (cache>dmr), on such a stream; found on --python-path
  memres-py-arena  the same over --arena-spec (arena)
  cuda.core     DeviceMemoryResource (cuda.core, or cuda.core.experimental on older releases)
  torch         PyTorch's caching allocator (torch.cuda.caching_allocator_alloc / _delete)
  cupy          a CuPy MemoryPool (pool.malloc, free by dropping the MemoryPointer)
  cuda.bindings the raw driver calls from Python (cuMemAllocFromPoolAsync / cuMemFreeAsync on the
                device's current pool): the floor any Python wrapper stands on
  python        an empty loop making two no-op calls per pair: Python's own cost

Each peer is optional: a missing import or a failing setup gives a row marked n/a with the
reason. Timing: time.perf_counter_ns around loops of N pairs (N scaled so that one repetition
lasts about --target-ms), a stream synchronize at the end of each loop, one warm-up, then the
median of R repetitions with the peers interleaved (their order rotates every repetition).
Before the first row every peer, alike, runs --warmup-pairs pairs at the first size, untimed:
first calls (ctypes' argument conversion, lazy binding, a pool's first growth) would otherwise
land in the first row of whichever peer pays them.
The random trace uses Python's own generator (seeded), the same for every peer here; it is not
the C harness's sequence, only the same recipe.

Prints a table; with --json prints JSON on stdout and the table on stderr. Runs on Python 3.8+
with nothing installed (then only memres, and python, are measured).
"""

import argparse
import ctypes
import datetime
import gc
import json
import os
import platform
import random
import re
import statistics
import sys
import time

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
DEFAULT_SIZES = [256, 4 * KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB, 256 * MIB]
QUICK_SIZES = [256, 4 * KIB, 64 * KIB, MIB]
HERE = os.path.dirname(os.path.abspath(__file__))


def format_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if n == int(n) else ("%.3g %s" % (n, unit))
        n /= 1024.0
    return str(n)


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*(B|K|KiB|M|MiB|G|GiB)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError("'%s' is not a size" % text)
    factor = {"": 1, "b": 1, "k": KIB, "kib": KIB, "m": MIB, "mib": MIB, "g": GIB, "gib": GIB}
    return int(m.group(1)) * factor[(m.group(2) or "").lower()]


def make_trace(live, min_size, max_size, seed):
    """The recipe of memres-bench's random workload: fill @live slots, 2 x @live random
    operations (allocate while not full, with probability 1/2), then free the rest in random
    order. Returns [(slot, size)], size 0 meaning free."""
    rng = random.Random(seed)
    free_slots = list(range(live - 1, -1, -1))
    live_slots = []
    ops = []

    def alloc_one():
        s = free_slots.pop()
        live_slots.append(s)
        ops.append((s, rng.randint(min_size, max_size)))

    def free_one():
        k = rng.randrange(len(live_slots))
        s = live_slots[k]
        live_slots[k] = live_slots[-1]
        live_slots.pop()
        free_slots.append(s)
        ops.append((s, 0))

    while len(live_slots) < live:
        alloc_one()
    for _ in range(2 * live):
        if not live_slots or (len(live_slots) < live and rng.random() < 0.5):
            alloc_one()
        else:
            free_one()
    while live_slots:
        free_one()
    return ops


# ---- peers -------------------------------------------------------------------------------------
#
# A peer has .name, .version and three methods: pairs(size, n) and trace(ops, n_slots, n) return
# the nanoseconds n repetitions took (a stream synchronize included), close() releases what it
# holds. Construction raises when the peer is not usable; the message becomes the n/a reason.


class PythonFloor:
    name = "python"

    def __init__(self, args):
        self.version = platform.python_version()

    def pairs(self, size, n):
        def alloc(size):
            return size

        def free(handle):
            return None

        t0 = time.perf_counter_ns()
        for _ in range(n):
            free(alloc(size))
        return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        slots = [None] * n_slots

        def alloc(size):
            return size

        def free(handle):
            return None

        t0 = time.perf_counter_ns()
        for _ in range(n):
            for slot, size in ops:
                if size:
                    slots[slot] = alloc(size)
                else:
                    free(slots[slot])
                    slots[slot] = None
        return time.perf_counter_ns() - t0

    def close(self):
        pass


class GError(ctypes.Structure):
    _fields_ = [("domain", ctypes.c_uint32), ("code", ctypes.c_int), ("message", ctypes.c_char_p)]


def driver_table_index(name):
    """Index of @name in memres's driver table (MEMRES_CUDA_FOREACH_ENTRY; entries are only
    appended, so indices are stable), read from the header next to this script."""
    fallback = {"cuStreamCreate": 19, "cuStreamDestroy": 20, "cuStreamSynchronize": 21}
    header = os.path.join(HERE, "..", "include", "memres", "memres-cuda.h")
    try:
        with open(header) as f:
            text = f.read()
        block = text.split("#define MEMRES_CUDA_FOREACH_ENTRY(X)", 1)[1].split("\n\n", 1)[0]
        return re.findall(r"X \((\w+)\)", block).index(name)
    except (OSError, IndexError, ValueError):
        return fallback[name]


def find_libmemres(explicit):
    if explicit:
        return explicit
    if os.environ.get("MEMRES_LIBMEMRES"):
        return os.environ["MEMRES_LIBMEMRES"]
    root = os.path.dirname(HERE)
    for entry in sorted(os.listdir(root)):
        candidate = os.path.join(root, entry, "core", "libmemres.so")
        if entry.startswith("build") and os.path.exists(candidate):
            return candidate
    return "libmemres.so.2"


class MemresPeer:
    name = "memres"

    def __init__(self, args):
        lib = ctypes.CDLL(find_libmemres(args.libmemres))
        vp, err_p = ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(GError))
        lib.memres_get_version.restype = ctypes.c_char_p
        lib.memres_resource_new.restype = vp
        lib.memres_resource_new.argtypes = [ctypes.c_char_p, err_p]
        lib.memres_resource_unref.argtypes = [vp]
        lib.memres_resource_allocate.restype = vp
        lib.memres_resource_allocate.argtypes = [vp, ctypes.c_size_t, vp, vp]
        lib.memres_buffer_close.restype = ctypes.c_int
        lib.memres_buffer_close.argtypes = [vp, vp, vp]
        lib.memres_buffer_unref.argtypes = [vp]
        lib.memres_cuda_get_driver.restype = vp
        lib.memres_cuda_get_driver.argtypes = [err_p]
        lib.memres_cuda_ensure_context.restype = ctypes.c_int
        lib.memres_cuda_ensure_context.argtypes = [ctypes.c_int, err_p]
        self.lib = lib
        self.version = lib.memres_get_version().decode()

        err = ctypes.POINTER(GError)()
        self.mr = lib.memres_resource_new(args.memres_spec.encode(), ctypes.byref(err))
        if not self.mr:
            raise RuntimeError("memres_resource_new('%s'): %s" % (args.memres_spec, self._msg(err)))
        table = lib.memres_cuda_get_driver(ctypes.byref(err))
        if not table:
            raise RuntimeError("memres_cuda_get_driver: %s" % self._msg(err))
        if not lib.memres_cuda_ensure_context(args.device, ctypes.byref(err)):
            raise RuntimeError("memres_cuda_ensure_context: %s" % self._msg(err))

        def entry(name, *argtypes):
            # struct_size (4), driver_version (4), path (8), then one pointer per entry
            addr = ctypes.c_void_p.from_address(table + 16 + 8 * driver_table_index(name)).value
            if not addr:
                raise RuntimeError("the driver has no %s" % name)
            return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(addr)

        self.stream_sync = entry("cuStreamSynchronize", vp)
        self.stream_destroy = entry("cuStreamDestroy", vp)
        stream = ctypes.c_void_p()
        rc = entry("cuStreamCreate", ctypes.POINTER(vp), ctypes.c_uint)(ctypes.byref(stream), 1)
        if rc != 0:
            raise RuntimeError("cuStreamCreate failed with CUresult %d" % rc)
        self.stream = stream.value

    def _msg(self, err):
        return err.contents.message.decode() if err else "unknown error"

    def _fail(self, size):
        """Allocation failed in a loop (which passes no GError): ask again for the reason."""
        err = ctypes.POINTER(GError)()
        b = self.lib.memres_resource_allocate(self.mr, size, self.stream, ctypes.byref(err))
        if b:
            self.lib.memres_buffer_close(b, self.stream, None)
            self.lib.memres_buffer_unref(b)
        raise RuntimeError("memres_resource_allocate(%d): %s" % (size, self._msg(err)))

    def _sync(self):
        rc = self.stream_sync(self.stream)
        if rc != 0:
            raise RuntimeError("cuStreamSynchronize failed with CUresult %d" % rc)

    def pairs(self, size, n):
        allocate, close, unref = (self.lib.memres_resource_allocate, self.lib.memres_buffer_close,
                                  self.lib.memres_buffer_unref)
        mr, s = self.mr, self.stream
        t0 = time.perf_counter_ns()
        for _ in range(n):
            b = allocate(mr, size, s, None)
            if not b:
                self._fail(size)
            close(b, s, None)
            unref(b)
        self._sync()
        return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        allocate, close, unref = (self.lib.memres_resource_allocate, self.lib.memres_buffer_close,
                                  self.lib.memres_buffer_unref)
        mr, s = self.mr, self.stream
        slots = [None] * n_slots
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for slot, size in ops:
                if size:
                    b = allocate(mr, size, s, None)
                    if not b:
                        self._fail(size)
                    slots[slot] = b
                else:
                    b = slots[slot]
                    close(b, s, None)
                    unref(b)
        self._sync()
        return time.perf_counter_ns() - t0

    def close(self):
        self._sync()
        self.stream_destroy(self.stream)
        self.lib.memres_resource_unref(self.mr)


def find_package(explicit, libmemres=None):
    """Imports the memres package: from --python-path, else the build tree of --libmemres
    ($MEMRES_LIBMEMRES), else build/python next to this script, else wherever Python finds
    it (never another build tree's: a sanitizer build's module cannot load here)."""
    libmemres = libmemres or os.environ.get("MEMRES_LIBMEMRES")
    candidates = [explicit] if explicit else []
    if libmemres:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(
            os.path.realpath(libmemres))), "python"))
    candidates.append(os.path.join(HERE, "..", "build", "python"))
    for path in candidates:
        if explicit == path or os.path.isdir(os.path.join(path, "memres")):
            if path not in sys.path:
                sys.path.insert(0, path)
            break
    import memres
    return memres


class MemresPackagePeer(MemresPeer):
    """The package, on a stream made as MemresPeer makes its own, through the libmemres the
    extension module loaded; over --package-spec (cache>dmr)."""
    name = "memres-py"

    def spec(self, args):
        return args.package_spec

    def __init__(self, args):
        memres = find_package(args.python_path, args.libmemres)
        ctypes_args = argparse.Namespace(**vars(args))
        ctypes_args.libmemres = memres._memres.library_path()
        ctypes_args.memres_spec = "host"
        super().__init__(ctypes_args)
        spec = self.spec(args).replace("{device}", str(args.device))
        self.version = "%s (%s)" % (memres.__version__, spec)
        self.package_mr = memres.Resource(spec)

    def pairs(self, size, n):
        allocate, s = self.package_mr.allocate, self.stream
        t0 = time.perf_counter_ns()
        for _ in range(n):
            allocate(size, s).close()  # on the buffer's stream, s
        self._sync()
        return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        allocate, s = self.package_mr.allocate, self.stream
        slots = [None] * n_slots
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for slot, size in ops:
                if size:
                    slots[slot] = allocate(size, s)
                else:
                    slots[slot].close()
                    slots[slot] = None
        self._sync()
        return time.perf_counter_ns() - t0

    def close(self):
        self.package_mr = None
        super().close()


class MemresPackageArenaPeer(MemresPackagePeer):
    """The package over --arena-spec (arena): the same loops as memres-py."""
    name = "memres-py-arena"

    def spec(self, args):
        return args.arena_spec


def import_cuda_core():
    try:
        import cuda.core as core

        core.Device, core.DeviceMemoryResource  # noqa: B018 (newer releases export them here)
        return core, "cuda.core"
    except (ImportError, AttributeError):
        import cuda.core.experimental as core

        return core, "cuda.core.experimental"


class CudaCorePeer:
    name = "cuda.core"

    def __init__(self, args):
        core, path = import_cuda_core()
        try:
            from importlib.metadata import version

            self.version = "%s (%s)" % (version("cuda-core"), path)
        except Exception:
            self.version = path
        self.dev = core.Device(args.device)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.mr = core.DeviceMemoryResource(args.device)

    def pairs(self, size, n):
        allocate, s = self.mr.allocate, self.stream
        t0 = time.perf_counter_ns()
        for _ in range(n):
            allocate(size, stream=s).close(s)
        s.sync()
        return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        allocate, s = self.mr.allocate, self.stream
        slots = [None] * n_slots
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for slot, size in ops:
                if size:
                    slots[slot] = allocate(size, stream=s)
                else:
                    slots[slot].close(s)
                    slots[slot] = None
        s.sync()
        return time.perf_counter_ns() - t0

    def close(self):
        self.stream.sync()
        self.stream.close()


class TorchPeer:
    name = "torch"

    def __init__(self, args):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        self.torch = torch
        self.version = torch.__version__
        self.device = args.device
        torch.cuda.set_device(args.device)
        self.stream = torch.cuda.Stream(device=args.device)

    def pairs(self, size, n):
        alloc, free = self.torch.cuda.caching_allocator_alloc, self.torch.cuda.caching_allocator_delete
        d, s = self.device, self.stream
        t0 = time.perf_counter_ns()
        for _ in range(n):
            free(alloc(size, d, s))
        s.synchronize()
        return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        alloc, free = self.torch.cuda.caching_allocator_alloc, self.torch.cuda.caching_allocator_delete
        d, s = self.device, self.stream
        slots = [None] * n_slots
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for slot, size in ops:
                if size:
                    slots[slot] = alloc(size, d, s)
                else:
                    free(slots[slot])
        s.synchronize()
        return time.perf_counter_ns() - t0

    def close(self):
        self.stream.synchronize()
        self.torch.cuda.empty_cache()


class CupyPeer:
    name = "cupy"

    def __init__(self, args):
        import cupy

        self.cupy = cupy
        self.version = cupy.__version__
        cupy.cuda.Device(args.device).use()
        self.pool = cupy.cuda.MemoryPool()
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def pairs(self, size, n):
        malloc, s = self.pool.malloc, self.stream
        with s:
            t0 = time.perf_counter_ns()
            for _ in range(n):
                m = malloc(size)
                del m
            s.synchronize()
            return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        malloc, s = self.pool.malloc, self.stream
        slots = [None] * n_slots
        with s:
            t0 = time.perf_counter_ns()
            for _ in range(n):
                for slot, size in ops:
                    if size:
                        slots[slot] = malloc(size)
                    else:
                        slots[slot] = None
            s.synchronize()
            return time.perf_counter_ns() - t0

    def close(self):
        self.stream.synchronize()
        self.pool.free_all_blocks()


class CudaBindingsPeer:
    name = "cuda.bindings"

    def __init__(self, args):
        from cuda.bindings import driver

        self.drv = driver
        try:
            from importlib.metadata import version

            self.version = version("cuda-bindings")
        except Exception:
            self.version = "?"

        def check(result):
            err, rest = result[0], result[1:]
            if err != driver.CUresult.CUDA_SUCCESS:
                raise RuntimeError("driver call failed: %s" % err)
            return rest[0] if len(rest) == 1 else rest

        self.check = check
        check(driver.cuInit(0))
        dev = check(driver.cuDeviceGet(args.device))
        ctx = check(driver.cuDevicePrimaryCtxRetain(dev))
        check(driver.cuCtxSetCurrent(ctx))
        self.pool = check(driver.cuDeviceGetMemPool(dev))
        non_blocking = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self.stream = check(driver.cuStreamCreate(non_blocking))

    def pairs(self, size, n):
        alloc, free = self.drv.cuMemAllocFromPoolAsync, self.drv.cuMemFreeAsync
        pool, s = self.pool, self.stream
        t0 = time.perf_counter_ns()
        for _ in range(n):
            err, ptr = alloc(size, pool, s)
            free(ptr, s)
        self.check(self.drv.cuStreamSynchronize(s) + (None,))
        return time.perf_counter_ns() - t0

    def trace(self, ops, n_slots, n):
        alloc, free = self.drv.cuMemAllocFromPoolAsync, self.drv.cuMemFreeAsync
        pool, s = self.pool, self.stream
        slots = [None] * n_slots
        t0 = time.perf_counter_ns()
        for _ in range(n):
            for slot, size in ops:
                if size:
                    slots[slot] = alloc(size, pool, s)[1]
                else:
                    free(slots[slot], s)
        self.check(self.drv.cuStreamSynchronize(s) + (None,))
        return time.perf_counter_ns() - t0

    def close(self):
        self.drv.cuStreamSynchronize(self.stream)
        self.drv.cuStreamDestroy(self.stream)


PEERS = [MemresPeer, MemresPackagePeer, MemresPackageArenaPeer, CudaCorePeer, TorchPeer, CupyPeer, CudaBindingsPeer, PythonFloor]


# ---- measurement -------------------------------------------------------------------------------


def summarize(samples, iterations):
    s = sorted(samples)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return {"median": statistics.median(s), "min": s[0], "max": s[-1], "q1": q[0], "q3": q[2],
            "repetitions": len(s), "iterations": iterations}


def measure(live_peers, run, units, args, what):
    """run(peer, n) -> ns. Calibrates n per peer, warms up, then interleaves the repetitions.
    Returns {name: summary or {"error": ...}}."""
    target = args.target_ms * 1e6
    budget = args.row_budget_ms * 1e6
    iters, results, started = {}, {}, time.perf_counter_ns()
    if args.deadline and started > args.deadline:
        return {p.name: {"error": "skipped: the --time-limit ran out before this row"}
                for p in live_peers}
    for peer in list(live_peers):
        try:
            n = 1
            while True:
                t = max(run(peer, n), 1)
                if t >= target / 8 or n >= 1 << 24:
                    break
                n *= int(min(64, max(2, (target / 8) / t + 1)))
            iters[peer.name] = max(1, int(target / (t / n)))
            run(peer, iters[peer.name])  # warm-up at the measured n
        except Exception as e:  # a peer failing on one row keeps its other rows
            results[peer.name] = {"error": "%s: %s" % (type(e).__name__, e)}
    active = [p for p in live_peers if p.name in iters]
    reps = args.repetitions
    cost = sum(target for _ in active) or 1
    if cost * (reps + 1) > budget:
        reps = max(3, min(reps, int(budget / cost) - 1))
    samples = {p.name: [] for p in active}
    gc.disable()
    try:
        for r in range(reps):
            order = active[r % len(active):] + active[:r % len(active)] if active else []
            for peer in order:
                if peer.name in results:
                    continue
                try:
                    n = iters[peer.name]
                    samples[peer.name].append(run(peer, n) / (n * units))
                except Exception as e:
                    results[peer.name] = {"error": "%s: %s" % (type(e).__name__, e)}
    finally:
        gc.enable()
    for peer in active:
        if peer.name not in results:
            results[peer.name] = summarize(samples[peer.name], iters[peer.name])
    if not args.quiet:
        print("peers: %-24s %.2f s" % (what, (time.perf_counter_ns() - started) / 1e9),
              file=sys.stderr)
    return results


def warm_up(peers, size, n, quiet):
    """Runs @n pairs of @size on every peer, untimed. A peer that fails here is kept: its rows
    record the error."""
    started = time.perf_counter_ns()
    for peer in peers:
        try:
            peer.pairs(size, n)
        except Exception as e:
            if not quiet:
                print("peers: %s warm-up failed (%s: %s)" % (peer.name, type(e).__name__, e),
                      file=sys.stderr)
    if not quiet:
        print("peers: %-24s %.2f s" % ("warm-up %d x %s" % (n, format_size(size)),
                                       (time.perf_counter_ns() - started) / 1e9), file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="JSON on stdout, the table on stderr")
    p.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--peers", default=",".join(c.name for c in PEERS),
                   help="comma-separated peers to run (default: all)")
    p.add_argument("--libmemres", help="path of libmemres.so (default: $MEMRES_LIBMEMRES, "
                   "build*/core/libmemres.so next to this script, or libmemres.so.2)")
    p.add_argument("--memres-spec", default="dmr", help="spec of the memres resource (dmr)")
    p.add_argument("--package-spec", default="cache>dmr:device={device}",
                   help="spec of the memres-py peer's resource (cache>dmr:device={device}; "
                   "{device} is --device)")
    p.add_argument("--arena-spec", default="arena:device={device}",
                   help="spec of the memres-py-arena peer's resource (arena:device={device})")
    p.add_argument("--python-path", help="directory holding the memres package (default: "
                   "python/ of --libmemres's build tree, build/python next to this script, "
                   "else Python's path)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--repetitions", type=int)
    p.add_argument("--target-ms", type=float)
    p.add_argument("--row-budget-ms", type=float)
    p.add_argument("--sizes", help="comma-separated pair sizes")
    p.add_argument("--live", type=int)
    p.add_argument("--min-size", type=parse_size, default=KIB)
    p.add_argument("--max-size", type=parse_size)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--warmup-pairs", type=int,
                   help="untimed pairs per peer at the first size before any row (3000)")
    p.add_argument("--time-limit", type=float, default=0,
                   help="skip the rows that would start after this many seconds")
    args = p.parse_args(argv)
    args.deadline = time.perf_counter_ns() + int(args.time_limit * 1e9) if args.time_limit else 0
    q = args.quick
    args.repetitions = args.repetitions or (3 if q else 15)
    args.target_ms = args.target_ms or (2.0 if q else 20.0)
    args.row_budget_ms = args.row_budget_ms or (300.0 if q else 3000.0)
    args.live = args.live or (64 if q else 1000)
    if args.warmup_pairs is None:
        args.warmup_pairs = 300 if q else 3000
    args.max_size = args.max_size or (256 * KIB if q else 4 * MIB)
    sizes = ([parse_size(s) for s in args.sizes.split(",")] if args.sizes
             else (QUICK_SIZES if q else DEFAULT_SIZES))
    wanted = set(args.peers.split(","))
    unknown = wanted - {c.name for c in PEERS}
    if unknown:
        p.error("unknown peer(s) %s; known: %s" % (", ".join(sorted(unknown)),
                                                   ", ".join(c.name for c in PEERS)))

    peers, status = [], []
    for cls in PEERS:
        if cls.name not in wanted:
            continue
        try:
            peer = cls(args)
            peers.append(peer)
            status.append({"name": cls.name, "available": True, "version": peer.version,
                           "reason": None})
        except Exception as e:
            status.append({"name": cls.name, "available": False, "version": None,
                           "reason": "%s: %s" % (type(e).__name__, e)})
            if not args.quiet:
                print("peers: %s n/a (%s)" % (cls.name, status[-1]["reason"]), file=sys.stderr)

    if args.warmup_pairs > 0 and sizes:
        warm_up(peers, sizes[0], args.warmup_pairs, args.quiet)
    pairs = []
    for size in sizes:
        res = measure(peers, lambda peer, n, size=size: peer.pairs(size, n), 1, args,
                      "pairs %s" % format_size(size))
        pairs.append({"size": size, "label": format_size(size), "results": res})
    ops = make_trace(args.live, args.min_size, args.max_size, args.seed)
    rnd = measure(peers, lambda peer, n: peer.trace(ops, args.live, n), len(ops), args, "random")
    for peer in peers:
        try:
            peer.close()
        except Exception:
            pass

    out = {"tool": "peers.py", "schema": 1,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join([os.path.basename(sys.argv[0])] + (argv or sys.argv[1:])),
           "python": platform.python_version(), "quick": q, "device": args.device,
           "memres_spec": args.memres_spec, "package_spec": args.package_spec,
           "arena_spec": args.arena_spec,
           "repetitions": args.repetitions,
           "target_ms": args.target_ms, "warmup_pairs": args.warmup_pairs, "peers": status,
           "unit": "ns/pair",
           "pairs": pairs,
           "random": {"live": args.live, "min_size": args.min_size, "max_size": args.max_size,
                      "seed": args.seed, "operations": len(ops), "unit": "ns/op",
                      "results": rnd}}
    table = format_table(out)
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        sys.stdout.write("\n")
        sys.stderr.write(table)
    else:
        sys.stdout.write(table)
    return 0


def format_table(out):
    names = [s["name"] for s in out["peers"]]
    lines = ["peers (Python %s), median ns per pair / per operation" % out["python"]]
    for s in out["peers"]:
        if not s["available"]:
            lines.append("  %-14s n/a: %s" % (s["name"], s["reason"]))
    header = "  %-12s" % "size" + "".join("%16s" % n for n in names)
    lines.append(header)

    def cell(r):
        if r is None:
            return "%16s" % "n/a"
        if "error" in r:
            return "%16s" % "error"
        return "%16.0f" % r["median"]

    for row in out["pairs"]:
        lines.append("  %-12s" % row["label"] + "".join(cell(row["results"].get(n)) for n in names))
    lines.append("  %-12s" % "random" + "".join(cell(out["random"]["results"].get(n))
                                                for n in names))
    for row in out["pairs"] + [dict(out["random"], label="random")]:
        for n, r in row["results"].items():
            if "error" in r:
                lines.append("  %s %s: %s" % (row["label"], n, r["error"]))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
