"""CuPy with memres as its allocator through the package (memres.cupy.use(), moved from the
ctypes suite's tests/python/test_cupy_allocator.py): array creation, arithmetic, reductions and
frees give the results CuPy's own memory pool gives; every array's memory comes from memres (one
allocation per array) and all of it is freed; a failed allocation raises OutOfMemoryError (CuPy
itself does not check a NULL) and the context stays usable.

Run by test_frameworks.py in a fresh interpreter on the GPU. Exits 77 (skipped) without CuPy
or a CUDA device."""

import gc
import sys

try:
    import cupy
    import numpy
except ImportError as e:
    print(f"cupy is not importable ({e})")
    sys.exit(77)


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
    import memres
    import memres.cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            print("CuPy sees no CUDA device")
            sys.exit(77)
    except cupy.cuda.runtime.CUDARuntimeError as e:
        print(f"CuPy sees no CUDA device ({e})")
        sys.exit(77)

    reference = workload()
    cupy.get_default_memory_pool().free_all_blocks()

    alloc = memres.cupy.use()  # cache>dmr:device={device}, the legacy default stream
    malloc = alloc.malloc

    before = alloc.count_buffers(0)
    x = cupy.empty(12345, dtype=cupy.float32)
    assert alloc.count_buffers(0) == before + 1, "the array's memory is not memres's"
    mr = alloc.resource(0)
    stats = mr.stats()
    assert stats["n_buffers"] >= 1 and stats["used_current"] >= x.nbytes, stats
    del x
    assert alloc.count_buffers(0) == before

    got = workload()
    for k in reference:
        # cuBLAS may pick another kernel for other pointers' alignment: float tolerance
        numpy.testing.assert_allclose(got[k], reference[k], rtol=1e-5, atol=1e-5, err_msg=k)
    print("results equal to CuPy's memory pool:", ", ".join(sorted(reference)))
    print("memres statistics:", mr.stats())

    # a failing allocation (more than any device has): CuPy's CFunctionAllocator does not check
    # the pointer (what it makes of a NULL is printed: an address 0 nobody may touch), the
    # wrapper memres.cupy.use() installs raises OutOfMemoryError, and the context stays usable
    before = alloc.count_buffers(-1)
    raw = malloc.c_function_allocator.malloc(1 << 50)
    print(f"CFunctionAllocator.malloc(1 PiB) itself gives ptr {raw.ptr:#x} (0: CuPy does not "
          "check)")
    del raw
    try:
        cupy.empty(1 << 50, dtype=cupy.uint8)
    except MemoryError as e:  # cupy.cuda.memory.OutOfMemoryError
        print(f"1 PiB: CuPy raised {type(e).__name__}: {e}")
    else:
        raise AssertionError("CuPy did not raise for a failed allocation of 1 PiB")
    assert alloc.count_buffers(-1) == before
    cupy.cuda.Device(0).synchronize()
    total = int((cupy.arange(4096, dtype=cupy.int64) * 2).sum())
    cupy.cuda.Device(0).synchronize()
    assert total == 4095 * 4096, total
    print("context usable after the failure: a kernel ran, synchronize succeeded")

    gc.collect()
    cupy.cuda.Device(0).synchronize()
    assert alloc.count_buffers(-1) == 0, alloc.count_buffers(-1)
    stats = mr.stats()
    assert stats["n_buffers"] == 0 and stats["used_current"] == 0, stats
    assert stats["used_high"] > 0, stats
    cupy.cuda.set_allocator(None)
    print("ok")


if __name__ == "__main__":
    main()
