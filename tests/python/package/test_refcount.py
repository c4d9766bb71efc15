"""Lifetimes: a buffer outlives its resource, capsules outlive their buffer, no leak."""
import gc
import sys
import tracemalloc

import memres


def test_buffer_outlives_resource():
    mr = memres.Resource("limit:max=1MiB>host")
    buf = mr.allocate(1024)
    del mr
    gc.collect()
    buf.fill(1)
    assert buf.read(0, 1) == b"\x01"
    assert buf.memory_resource.kind == "limit"
    buf.close()


def test_capsule_outlives_buffer_object(host):
    buf = host.allocate(16)
    buf.fill(2)
    capsule = buf.__dlpack__(max_version=(1, 0))
    wrapped_memory = buf.handle
    del buf  # the last Python reference: the tensor still holds the C buffer
    gc.collect()
    wrapped = memres.from_dlpack(capsule)
    assert wrapped.handle == wrapped_memory and wrapped.read() == b"\x02" * 16
    wrapped.close()


def test_refcounts_of_objects(host):
    before = sys.getrefcount(host)
    bufs = [host.allocate(8) for _ in range(10)]
    for b in bufs:
        b.close()
    assert sys.getrefcount(host) == before


def pairs(mr, n):
    """n pairs of each way a buffer ends: close(), a with block, its last reference dropped;
    and close() after allocate(size, stream) (the stream kept as the last int seen)."""
    allocate = mr.allocate
    for _ in range(n):
        allocate(256).close()
    for _ in range(n):
        with allocate(64):
            pass
    for _ in range(n):
        allocate(128)
    for _ in range(n // 10):
        allocate(32, 0).close()


def traced_growth(mr, n):
    """Bytes Python's allocator holds more after n pairs of each way (tracemalloc), the free
    lists of Buffer objects and bound __exit__ methods warmed first."""
    pairs(mr, 1000)
    gc.collect()
    tracemalloc.start()
    try:
        first, _ = tracemalloc.get_traced_memory()
        pairs(mr, n)
        gc.collect()
        last, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return last - first


def test_no_leak_over_100000_pairs(host):
    mr = memres.Resource("stats>cache>host")
    assert traced_growth(mr, 100_000) < 64 * 1024
    assert mr.stats()["n_buffers"] == 0


def test_no_device_leak(device, fake_counts):
    # the fake driver's live counts are the process's: compared with the same fixture state
    device.allocate(1).close()
    before = fake_counts()
    mr = memres.Resource("stats>cache>dmr:device=0")
    assert traced_growth(mr, 100_000) < 64 * 1024
    assert mr.stats()["n_buffers"] == 0
    buf = mr.allocate(1 << 20)
    assert fake_counts()["pool_allocations"] > before["pool_allocations"]
    buf.close()
    del mr, buf
    gc.collect()
    after = fake_counts()
    for what in ("pools", "pool_allocations", "allocations", "streams", "events"):
        assert after[what] == before[what], (what, before, after)
