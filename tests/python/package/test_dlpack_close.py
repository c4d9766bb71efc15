"""close() of a buffer exported through DLPack: the Buffer object is closed at once, the memory
stays with the consumers' tensors and the last tensor's deleter frees it (cuda.core's and
CuPy's rule); no leak over many export/close cycles."""
import ctypes
import gc
import tracemalloc

import numpy
import pytest

import memres
from test_dlpack import consume_versioned


def n_buffers(mr):
    return mr.stats()["n_buffers"]


def assert_closed(buf):
    assert buf.closed and buf.size == 0 and buf.handle == 0 and buf.device_id == -1
    assert buf.memory_resource is None
    with pytest.raises(memres.ClosedError):
        buf.read()
    with pytest.raises(memres.ClosedError):
        buf.__dlpack__()


def test_numpy_array_outlives_close():
    mr = memres.Resource("stats>host")
    buf = mr.allocate(256)
    buf.write(bytes(range(256)))
    array = numpy.from_dlpack(buf)  # Debian's NumPy takes the legacy capsule
    buf.close()
    assert_closed(buf)
    assert n_buffers(mr) == 1  # the array's tensor holds the memory
    assert bytes(array) == bytes(range(256))
    buf.close()  # twice: nothing more
    assert n_buffers(mr) == 1
    del array  # the last tensor: its deleter frees the memory
    gc.collect()
    assert n_buffers(mr) == 0


def test_versioned_consumer_outlives_close():
    mr = memres.Resource("stats>host")
    buf = mr.allocate(64)
    buf.fill(0x3C)
    t = consume_versioned(buf.__dlpack__(max_version=(1, 0)))
    address = buf.handle
    buf.close()
    assert_closed(buf)
    assert n_buffers(mr) == 1
    assert t.dl_tensor.data == address
    assert ctypes.string_at(t.dl_tensor.data, 64) == b"\x3c" * 64
    t.deleter(ctypes.pointer(t))
    assert n_buffers(mr) == 0


def test_two_consumers_last_deleter_frees():
    mr = memres.Resource("stats>host")
    buf = mr.allocate(32)
    buf.fill(9)
    first = consume_versioned(buf.__dlpack__(max_version=(1, 0)))
    second = memres.from_dlpack(buf.__dlpack__())  # a legacy capsule, adopted
    buf.close()
    first.deleter(ctypes.pointer(first))
    assert n_buffers(mr) == 1
    assert second.read() == b"\x09" * 32
    second.close()
    assert n_buffers(mr) == 0


def test_close_after_consumers_are_gone_frees_at_once():
    mr = memres.Resource("stats>host")
    buf = mr.allocate(16)
    capsule = buf.__dlpack__(max_version=(1, 0))
    del capsule  # unconsumed: its tensor went with it
    assert n_buffers(mr) == 1
    buf.close()
    assert_closed(buf)
    assert n_buffers(mr) == 0


def test_memoryview_still_refuses_close_of_exported():
    mr = memres.Resource("stats>host")
    buf = mr.allocate(8)
    capsule = buf.__dlpack__()
    view = memoryview(buf)
    with pytest.raises(BufferError, match="memoryview"):
        buf.close()
    assert not buf.closed and buf.size == 8
    view.release()
    buf.close()
    assert_closed(buf)
    assert n_buffers(mr) == 1
    del capsule
    assert n_buffers(mr) == 0


def test_device_memory_outlives_close(device, fake_counts):
    mr = memres.Resource("stats>dmr:device=0")
    before = fake_counts()["pool_allocations"]
    buf = mr.allocate(1 << 20)
    buf.fill(0x5A)
    assert fake_counts()["pool_allocations"] == before + 1
    versioned = buf.__dlpack__(max_version=(1, 0), stream=-1)
    legacy = buf.__dlpack__()
    buf.close(stream=0)  # the memory is freed on this stream by the last tensor
    assert_closed(buf)
    assert fake_counts()["pool_allocations"] == before + 1 and n_buffers(mr) == 1
    wrapped = memres.from_dlpack(versioned)
    assert wrapped.device_id == 0 and wrapped.read() == b"\x5a" * (1 << 20)
    wrapped.close()
    assert fake_counts()["pool_allocations"] == before + 1  # the legacy capsule's tensor
    del legacy
    gc.collect()
    assert fake_counts()["pool_allocations"] == before and n_buffers(mr) == 0


def cycles(mr, n, host_memory):
    """n export/close cycles of each way: an unconsumed capsule dropped after the close, a
    versioned capsule consumed by memres.from_dlpack and closed, and on host memory a NumPy
    array (the legacy capsule) dropped after the close."""
    allocate = mr.allocate
    for _ in range(n):
        buf = allocate(4096)
        capsule = buf.__dlpack__(max_version=(1, 0))
        buf.close()
        del capsule
    for _ in range(n):
        buf = allocate(4096)
        capsule = buf.__dlpack__(max_version=(1, 0))
        buf.close()
        memres.from_dlpack(capsule).close()
    for _ in range(n if host_memory else 0):
        buf = allocate(4096)
        array = numpy.from_dlpack(buf)
        buf.close()
        del array


def traced_growth(mr, n, host_memory):
    cycles(mr, 1000, host_memory)
    gc.collect()
    tracemalloc.start()
    try:
        first, _ = tracemalloc.get_traced_memory()
        cycles(mr, n, host_memory)
        gc.collect()
        last, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return last - first


def test_no_leak_over_40000_export_close_cycles_host():
    mr = memres.Resource("stats>cache>host")
    assert traced_growth(mr, 40_000, True) < 64 * 1024
    assert n_buffers(mr) == 0


def test_no_leak_over_40000_export_close_cycles_device(device, fake_counts):
    device.allocate(1).close()
    before = fake_counts()
    mr = memres.Resource("stats>cache>dmr:device=0")
    assert traced_growth(mr, 40_000, False) < 64 * 1024
    assert n_buffers(mr) == 0
    del mr
    gc.collect()
    after = fake_counts()
    for what in ("pools", "pool_allocations", "allocations", "streams", "events"):
        assert after[what] == before[what], (what, before, after)
