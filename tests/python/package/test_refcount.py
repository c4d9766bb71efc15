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
    for _ in range(n):
        mr.allocate(256).close()
    for _ in range(n // 10):
        with mr.allocate(64):
            pass


def test_no_leak_over_100000_pairs(host):
    pairs(host, 1000)  # warm the free lists
    tracemalloc.start()
    try:
        first, _ = tracemalloc.get_traced_memory()
        pairs(host, 100_000)
        gc.collect()
        last, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert last - first < 64 * 1024


def test_no_device_leak(device, fake_counts):
    mr = memres.Resource("cache>dmr:device=0")
    pairs(mr, 100_000)
    device.allocate(1).close()
    buf = mr.allocate(1 << 20)
    buf.close()
    del mr, buf
    gc.collect()
    counts = fake_counts()
    device_pools = counts["pools"]
    assert counts["allocations"] == 0
    assert counts["pool_allocations"] == 0, counts
    assert device_pools >= 0
