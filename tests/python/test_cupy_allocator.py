"""CuPy with memres as its allocator (libmemres-allocator through
cupy.cuda.memory.CFunctionAllocator, legacy default stream): array creation, arithmetic,
reductions and frees give the results CuPy's own memory pool gives; every array's memory comes
from memres (one allocation per array, its pointer in the table) and all of it is freed.

Exit 77 (skipped) without CuPy or a CUDA device. Run by `meson test --suite python`."""

import gc
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "interop"))
from memres_interop import Allocator, Memres, skip  # noqa: E402

try:
    import cupy
    import numpy
except ImportError as e:
    skip(f"cupy is not importable ({e})")


def workload():
    rng = numpy.random.default_rng(7)
    a_host = rng.standard_normal((512, 384), dtype=numpy.float32)
    b_host = rng.standard_normal((384, 256), dtype=numpy.float32)
    a, b = cupy.asarray(a_host), cupy.asarray(b_host)
    c = a @ b
    d = cupy.tanh(c) * 3.0 + cupy.arange(256, dtype=cupy.float32)
    results = {
        "matmul": c,
        "elementwise": d,
        "sum": d.sum(axis=0),
        "max": d.max(axis=1),
        "mean": cupy.mean(d),
        "cumsum": cupy.cumsum(cupy.arange(10000, dtype=cupy.int64)),
        "sort": cupy.sort(cupy.asarray(rng.integers(0, 1 << 20, 50000))),
    }
    # many short-lived arrays of assorted sizes
    acc = cupy.zeros(1, dtype=cupy.float64)
    for i in range(300):
        t = cupy.full(1 + (i * 7919) % 100000, i, dtype=cupy.float64)
        acc += t.sum()
        del t
    results["loop"] = acc
    return {k: cupy.asnumpy(v) for k, v in results.items()}


def main():
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            skip("CuPy sees no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as e:
        skip(f"CuPy sees no CUDA device ({e})")

    reference = workload()
    cupy.get_default_memory_pool().free_all_blocks()

    alloc = Allocator()
    memres = Memres()
    c_alloc = cupy.cuda.memory.CFunctionAllocator(0, alloc.fn_address("memres_cupy_malloc"),
                                                  alloc.fn_address("memres_cupy_free"), alloc)
    cupy.cuda.set_allocator(c_alloc.malloc)

    before = alloc.count_buffers(0)
    x = cupy.empty(12345, dtype=cupy.float32)
    assert alloc.count_buffers(0) == before + 1, "the array's memory is not memres's"
    mr = alloc.resource(0)
    stats = memres.stats(mr)
    assert stats["n_buffers"] >= 1 and stats["used_current"] >= x.nbytes, stats
    del x
    assert alloc.count_buffers(0) == before

    got = workload()
    for k in reference:
        # cuBLAS may pick another kernel for other pointers' alignment: float tolerance
        numpy.testing.assert_allclose(got[k], reference[k], rtol=1e-5, atol=1e-5, err_msg=k)
    print("results equal to CuPy's memory pool:", ", ".join(sorted(reference)))
    print("memres statistics:", memres.stats(mr))

    gc.collect()
    cupy.cuda.Device(0).synchronize()
    assert alloc.count_buffers(-1) == 0, alloc.count_buffers(-1)
    stats = memres.stats(mr)
    assert stats["n_buffers"] == 0 and stats["used_current"] == 0, stats
    assert stats["used_high"] > 0, stats
    cupy.cuda.set_allocator(None)
    print("ok")


if __name__ == "__main__":
    main()
