"""memres.Resource, memres.default_resource and the module's functions."""
import gc
import os

import pytest

import memres
from conftest import MODE, IndexInt


def test_resource_from_spec(host):
    assert host.kind == "host"
    assert host.spec.startswith("host")
    assert host.device_id == -1
    assert host.is_host_accessible and not host.is_device_accessible
    assert memres.MemoryFlags.HOST_ACCESSIBLE in memres.MemoryFlags(host.flags)
    assert host.upstream is None
    assert repr(host).startswith("<memres.Resource host")
    # the spec makes the same resource again
    again = memres.Resource(host.spec)
    assert again.spec == host.spec
    assert again != host and host == host and hash(host) == hash(host)


def test_resource_stack_and_upstream():
    mr = memres.Resource("limit:max=1MiB>host")
    assert mr.kind == "limit"
    up = mr.upstream
    assert isinstance(up, memres.Resource) and up.kind == "host"
    assert up.upstream is None
    assert mr.spec.startswith("limit:") and ">host" in mr.spec


def test_resource_keyword_spec():
    assert memres.Resource(spec="host").kind == "host"
    with pytest.raises(TypeError):
        memres.Resource()
    with pytest.raises(TypeError):
        memres.Resource(42)


def test_allocate(host):
    buf = host.allocate(1000)
    assert isinstance(buf, memres.Buffer)
    assert buf.size >= 1000 and buf.handle != 0
    buf.close()
    buf = host.allocate(size=64, stream=None)
    assert buf.size >= 64
    buf.close()


def test_allocate_bad_arguments(host):
    # cuda.core's size_t conversion: OverflowError for a negative size or one past 2**64-1
    for bad in (-1, -(1 << 40), 1 << 64, 1 << 70):
        with pytest.raises(OverflowError, match=r"size must be an int from 0 to 2\*\*64-1, not %d"
                           % bad):
            host.allocate(bad)
        with pytest.raises(OverflowError):
            host.allocate(size=bad, stream=None)
    # one past sys.maxsize is a size memres refuses as out of memory, as the driver would
    with pytest.raises(memres.OutOfMemoryError) as info:
        host.allocate((1 << 64) - 1)
    assert info.value.code == memres.ErrorCode.OUT_OF_MEMORY
    assert "18446744073709551615 bytes (16.0 EiB)" in info.value.message
    # an __index__ object (a NumPy integer) is a size
    assert host.allocate(IndexInt(100)).size >= 100
    with pytest.raises(TypeError):
        host.allocate(1.0)
    with pytest.raises(TypeError):
        host.allocate("12")
    with pytest.raises(TypeError):
        host.allocate()
    with pytest.raises(TypeError):
        host.allocate(1, None, None)
    with pytest.raises(TypeError):
        host.allocate(1, nonsense=1)
    with pytest.raises(TypeError):
        host.allocate(1, size=2)


class CudaStreamProtocol:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class CudaStreamProtocolVersion:
    def __init__(self, version):
        self.version = version

    def __cuda_stream__(self):
        return (self.version, 0)


class TorchLikeStream:
    cuda_stream = 0


class CupyLikeStream:
    ptr = 0


def test_stream_arguments(host):
    # host memory ignores the stream, but every form of one is read
    for stream in (None, 0, 1, CudaStreamProtocol(0), TorchLikeStream(), CupyLikeStream()):
        host.allocate(16, stream=stream).close(stream=stream)
    for bad in ("stream", 1.5, object(), -1):
        with pytest.raises((TypeError, ValueError)):
            host.allocate(16, stream=bad)

    class BadProtocol:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(TypeError):
        host.allocate(16, stream=BadProtocol())
    # a protocol version other than cuda.core's 0 is not read as a handle (it was)
    for version in (1, -1, 99, 1 << 80, "0", None):
        with pytest.raises(ValueError, match="protocol version .*: memres reads version 0"):
            host.allocate(16, stream=CudaStreamProtocolVersion(version))


class IntOnly:
    """A handle object that converts by int() alone (cuda.bindings' CUstream)."""

    def __init__(self, value):
        self.value = value

    def __int__(self):
        return self.value


class HandleStream:
    """A stream with an int .handle (PyCUDA's, Numba's)."""

    def __init__(self, handle):
        self.handle = handle


class ListProtocol:
    def __cuda_stream__(self):
        return [0, 2]


class AttributeProtocol:
    __cuda_stream__ = (0, 2)  # the attribute form cuda.core still takes


def test_stream_forms_reach_the_driver(device):
    # each form of a stream gives memres the same handle: 2, the per-thread default stream,
    # which the buffer reports as its stream (they were TypeErrors: a NumPy integer, a .handle,
    # a list from __cuda_stream__, __cuda_stream__ as an attribute, a CUstream-like handle)
    forms = (2, IndexInt(2), CudaStreamProtocol(2), CudaStreamProtocol(IndexInt(2)),
             CudaStreamProtocol(IntOnly(2)), IntOnly(2), ListProtocol(), AttributeProtocol(),
             HandleStream(2), HandleStream(IndexInt(2)))
    for form in forms:
        buf = device.allocate(256, stream=form)
        assert buf.__cuda_array_interface__["stream"] == 2, form
        buf.fill(0x3C, stream=form)
        assert buf.read(0, 4, stream=form) == b"\x3c" * 4
        buf.close(stream=form)
    # memory is not a stream: a Buffer's .handle (an address) is not taken for one
    other = device.allocate(16)
    with pytest.raises(TypeError, match="not a stream: memres.Buffer"):
        device.allocate(16, stream=other)

    class MemoryWithHandle:
        handle = other.handle

        def __dlpack__(self, **kwargs):
            raise AssertionError("not called")

    with pytest.raises(TypeError, match="not a stream: MemoryWithHandle"):
        device.allocate(16, stream=MemoryWithHandle())
    class FloatLike(IntOnly):  # a NumPy float32, a Decimal: __int__ and __float__
        def __float__(self):
            return float(self.value)

    for bad in (True, 2.0, HandleStream("2"), HandleStream(2.5), CudaStreamProtocol(2.0),
                FloatLike(2), HandleStream(FloatLike(2)), CudaStreamProtocol(FloatLike(2))):
        with pytest.raises(TypeError):
            device.allocate(16, stream=bad)
    with pytest.raises(memres.OutOfRangeError):
        device.allocate(16, stream=HandleStream(-1))
    other.close()


def test_stats_and_trim():
    mr = memres.Resource("stats>host")
    stats = mr.stats()
    assert stats == {"reserved_current": 0, "reserved_high": 0, "used_current": 0,
                     "used_high": 0, "n_buffers": 0}
    buf = mr.allocate(4096)
    stats = mr.stats()
    assert stats["used_current"] == buf.size and stats["n_buffers"] == 1
    size = buf.size
    buf.close()
    assert mr.stats()["used_current"] == 0 and mr.stats()["used_high"] == size
    mr.reset_stats()
    assert mr.stats()["used_high"] == 0
    with pytest.raises(memres.Error) as info:
        mr.trim()  # host memory keeps nothing to trim
    assert info.value.code == memres.ErrorCode.NOT_SUPPORTED
    with pytest.raises(TypeError):
        mr.trim("x")


def test_counters(tmp_path):
    # every resource has the core's contract_breaches; an adaptor without counters (stats)
    # gives its upstream's
    assert memres.Resource("host").counters() == {"contract_breaches": 0}
    assert memres.Resource("stats>host").counters() == {"contract_breaches": 0}
    limit = memres.Resource("limit:max=1MiB>host")
    buf = limit.allocate(4096)
    assert limit.counters() == {"contract_breaches": 0, "limit": 1 << 20, "used": buf.size}
    buf.close()
    assert limit.counters()["used"] == 0
    mr = memres.Resource("cache>host")
    before = mr.counters()
    assert before["hits"] == 0 and before["misses"] == 0 and before["used"] == 0
    assert isinstance(before["events"], bool)
    mr.allocate(1000).close()  # a miss: a chunk for the 1 KiB class
    buf = mr.allocate(1000)  # a hit
    after = mr.counters()
    assert after["misses"] == 1 and after["hits"] == 1 and after["used"] == 1024
    assert after["reserved"] == mr.stats()["reserved_current"] > 0
    # the classes (a(tttt)): class size, hits, misses, bytes cached, as tuples of ints
    classes = {c[0]: c for c in after["classes"]}
    assert all(isinstance(c, tuple) and len(c) == 4 for c in after["classes"])
    assert classes[1024][1:3] == (1, 1) and classes[256] == (256, 0, 0, 0)
    buf.close()
    # a string counter: the log adaptor's write_error, "" when every line was written
    log = memres.Resource("log:path=" + str(tmp_path / "t.csv") + ">host")
    log.allocate(64).close()
    c = log.counters()
    assert c["write_error"] == "" and c["lines_lost"] == 0
    assert c["lines_written"] == len((tmp_path / "t.csv").read_text().splitlines()) == 3


def test_counters_arena(device):
    # the arena's granules (issue 38): a 1 MiB buffer takes one granule, and the next one of that
    # size after its close takes it again (no new one)
    mr = memres.Resource("arena:device=0")
    mr.allocate(1 << 20).close()
    c = mr.counters()
    assert c["granules_created"] == 1 and c["large_allocations"] == 1
    assert c["physical"] == c["granularity"] >= 1 << 20
    mr.allocate(1 << 20).close()
    c = mr.counters()
    assert c["granules_created"] == 1 and c["large_allocations"] == 2 and c["used"] == 0


def test_trim_bytes_to_keep_checked():
    # a negative bytes_to_keep was taken as 2**64 - 1 ("keep everything"): no trim, no error
    mr = memres.Resource("cache:chunk=64KiB>host")
    mr.allocate(256).close()
    held = mr.stats()["reserved_current"]
    assert held == 64 * 1024
    for bad in (-1, -(1 << 20), 1 << 64):
        with pytest.raises(ValueError, match="bytes_to_keep must be an int from 0 to 2"):
            mr.trim(bad)
        with pytest.raises(ValueError):
            mr.trim(bytes_to_keep=bad)
    with pytest.raises(TypeError):
        mr.trim(1.5)
    assert mr.stats()["reserved_current"] == held
    mr.trim((1 << 64) - 1)  # keep everything
    assert mr.stats()["reserved_current"] == held
    mr.trim(0)
    assert mr.stats()["reserved_current"] == 0


def test_trim_device(device):
    mr = memres.Resource("cache>dmr:device=0")
    mr.allocate(1 << 20).close()
    assert mr.stats()["reserved_current"] > 0
    mr.trim()
    mr.trim(bytes_to_keep=1 << 20)
    mr.trim(0)
    assert mr.stats()["reserved_current"] == 0


def test_default_resource():
    mr = memres.default_resource(-1)
    assert mr.kind == "host"
    mr = memres.default_resource()
    assert mr.kind == ("host" if MODE == "host" else "dmr")
    mr = memres.default_resource(device=None)
    with pytest.raises(memres.InvalidArgumentError) as info:
        memres.default_resource(-2)
    assert info.value.code == memres.ErrorCode.INVALID_ARGUMENT
    with pytest.raises(TypeError):
        memres.default_resource("0")
    if MODE != "host":
        with pytest.raises(memres.NoDeviceError) as info:
            memres.default_resource(97)
        assert info.value.code == memres.ErrorCode.NO_DEVICE


def test_default_resource_is_one_object_per_device():
    """default_resource() is one Resource per device for the process's life, as cuda.core's
    Device(n).memory_resource is: the same object (so ==, hash() and its statistics agree), and
    None the current device's. It built a new stack on every call: unequal objects."""
    host = memres.default_resource(-1)
    assert memres.default_resource(-1) is host
    assert memres.default_resource(device=-1) is host and memres.default_resource(IndexInt(-1)) is host
    assert memres.default_resource(-1) == host and hash(memres.default_resource(-1)) == hash(host)
    current = memres.default_resource()
    assert memres.default_resource(None) is current
    if MODE == "host":
        # no driver: the current device is 0, whose default is host memory, its own object
        assert current is memres.default_resource(0) and current is not host
        assert current.kind == "host"
    else:
        assert current is memres.default_resource(0) and current.kind == "dmr"
    # one stack: a buffer of it counts in what a later call's object reads (a new stack had 0)
    before = host.stats()["n_buffers"]
    buf = host.allocate(64)
    assert memres.default_resource(-1).stats()["n_buffers"] == before + 1
    buf.close()
    assert memres.default_resource(-1).stats()["n_buffers"] == before
    # a refused device caches nothing
    with pytest.raises(memres.InvalidArgumentError):
        memres.default_resource(-2)
    assert memres.default_resource(-1) is host


def test_default_resource_closed_is_replaced():
    """Closing the default ends that object (its open buffers live on); the next call makes a
    new default, which is then the one every call returns."""
    old = memres.default_resource(-1)
    buf = old.allocate(16)
    buf.fill(0x2A)
    old.close()
    assert old.closed
    new = memres.default_resource(-1)
    assert new is not old and not new.closed and new.kind == "host"
    assert memres.default_resource(-1) is new and new != old
    assert buf.read() == b"\x2a" * 16  # the closed object's buffer is still good
    buf.close()
    with memres.default_resource(-1) as mr:  # `with` closes it too: replaced again
        assert mr is new
    assert new.closed and memres.default_resource(-1) is not new


def test_default_resource_threads():
    """Threads asking at once for a device's default all get the one object (the creation runs
    without the GIL: the first to finish wins, the others' resources are dropped)."""
    import threading

    memres.default_resource(-1).close()  # the next call creates it, racing
    barrier = threading.Barrier(8)
    got = [None] * 8

    def ask(i):
        barrier.wait()
        got[i] = memres.default_resource(-1)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(mr is got[0] for mr in got) and not got[0].closed
    assert memres.default_resource(-1) is got[0]


def test_kinds_and_plugin_path(tmp_path):
    kinds = memres.kinds()
    assert "host" in kinds and "limit" in kinds and "cache" in kinds
    path = memres.plugin_search_path()
    env = [d for d in os.environ.get("MEMRES_PLUGIN_PATH", "").split(":") if d]
    assert path[: len(env)] == env
    memres.set_plugin_dir(str(tmp_path))
    assert memres.plugin_search_path()[len(env)] == str(tmp_path)
    memres.set_plugin_dir(None)
    assert str(tmp_path) not in memres.plugin_search_path()
    assert memres._memres.library_path().endswith(".so.2") or ".so" in memres._memres.library_path()


def test_set_plugin_dir_refuses_missing(tmp_path):
    """A directory that is not there was taken silently and searched for nothing: refused with
    memres.FileError (an OSError) naming the path, the search path unchanged."""
    before = memres.plugin_search_path()
    missing = tmp_path / "no-such-dir"
    afile = tmp_path / "a-file"
    afile.write_text("x")
    for path, code in ((missing, "NOENT"), (afile, "NOTDIR")):
        for arg in (str(path), path, bytes(path)):
            with pytest.raises(memres.FileError) as info:
                memres.set_plugin_dir(arg)
            assert isinstance(info.value, OSError)
            assert info.value.domain == "g-file-error-quark"
            assert info.value.code == {"NOENT": 4, "NOTDIR": 5}[code]  # GFileError
            assert str(path) in info.value.message
            assert memres.plugin_search_path() == before
    with pytest.raises(TypeError):
        memres.set_plugin_dir(12)


def test_version():
    parts = memres.__version__.split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts)


def test_resource_outlives_python_object(host):
    buf = host.allocate(32)
    del host
    gc.collect()
    assert buf.memory_resource.kind == "host"
    buf.close()


def test_snapshot():
    mr = memres.Resource("limit:max=1MiB>host")
    buf = mr.allocate(4096)
    snap = mr.snapshot()
    assert snap["memres_snapshot"] == 1
    assert snap["spec"] == mr.spec
    assert [layer["kind"] for layer in snap["layers"]] == ["limit", "host"]
    assert snap["layers"][0]["figures"] == {"limit": 1 << 20, "limit_used": 4096}
    assert snap["layers"][1]["used"] == 4096
    assert snap["layers"][1]["described"] is False
    text = mr.snapshot(as_text=True)
    assert isinstance(text, str) and text.startswith("{") and text.endswith("}\n")
    assert mr.oom_snapshot() is None
    with pytest.raises(memres.OutOfMemoryError):
        mr.allocate(2 << 20)
    oom = mr.oom_snapshot()
    assert oom["layers"][0]["figures"]["limit_used"] == 4096
    assert mr.oom_snapshot(as_text=True).startswith("{")
    with pytest.raises(TypeError):
        mr.snapshot(1, 2)
    buf.close()


def test_torch_snapshot_needs_use():
    import memres.torch
    with pytest.raises(memres.Error):
        memres.torch.snapshot(0)


def test_snapshot_lists_every_live_block():
    """Each live buffer is one used block of the cache, whatever its size: carved from a chunk,
    a block of its own (a class above the chunked ones) or a request above max_block; the
    layer is complete, its segments hold its reserved bytes, and the largest free block is
    known (PyTorch's snapshot test: the active blocks are the allocated tensors)."""
    mr = memres.Resource("cache:chunk=64KiB,max_block=256KiB>host")
    bufs = [mr.allocate(n) for n in (1000, 100 << 10, 100 << 10, 1 << 20, 300 << 10)]
    bufs.pop(2).close()
    cache = mr.snapshot()["layers"][0]
    used = [b for b in cache["blocks"] if b["state"] == "used"]
    assert sorted(int(b["address"], 16) for b in used) == sorted(b.handle for b in bufs)
    sizes = {int(b["address"], 16): b["size"] for b in used}
    assert all(sizes[b.handle] >= b.size for b in bufs)
    assert sizes[bufs[2].handle] == 1 << 20 and sizes[bufs[3].handle] == 300 << 10
    assert cache["complete"] and cache["unseen"] is None
    assert "unlisted_used" not in cache["figures"]
    assert sum(s["size"] for s in cache["segments"]) == cache["reserved"]
    free = [b["size"] for b in cache["blocks"] if b["state"] != "used"]
    # the block of its own closed: its class, 100 KiB rounded up
    assert cache["largest_free"] == max(free) and 100 << 10 <= max(free) < 128 << 10
    assert cache["cached"] == sum(free)
    # the request above max_block closed: its block and its segment go
    big = bufs.pop(2)
    address = big.handle
    big.close()
    cache = mr.snapshot()["layers"][0]
    assert address not in [int(b["address"], 16) for b in cache["blocks"]]
    assert address not in [int(s["address"], 16) for s in cache["segments"]]
    assert len([b for b in cache["blocks"] if b["state"] == "used"]) == len(bufs) == 3
    for b in bufs:
        b.close()


# A child that creates Resource("log:...>host") on a thread while the log (a pty with its buffer
# full, nobody reading) blocks the layer's first write, the header's; the main thread, once the
# other is in write(), reads the pty, which lets the creation go on. It printed the header.
_CREATION_HELD = r"""
import os, select, sys, threading, time, tty
import memres

WRITE = {"x86_64": 1, "aarch64": 64}[os.uname().machine]
master, slave = os.openpty()
tty.setraw(slave)
name = os.ttyname(slave)
filler = os.open(name, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
n = 0
idle = 0
while idle < 3:  # full: the kernel moves what was written to the reader's side after a while
    before = n
    for chunk in (4096, 1):
        try:
            while True:
                n += os.write(filler, b"x" * chunk)
        except BlockingIOError:
            pass
    idle = idle + 1 if n == before else 0
    time.sleep(0.02)
out = {}
t = threading.Thread(target=lambda: out.update(mr=memres.Resource(f"log:path={name},flush=true>host")))
t.start()
while t.is_alive():  # until the creating thread blocks in write() on the full pty
    with open(f"/proc/self/task/{t.native_id}/syscall") as f:
        if f.read().split()[0] == str(WRITE):
            break
    time.sleep(0.001)
assert t.is_alive(), "the creation did not wait for the pty"
data = b""
while b"\n" not in data[n:] and select.select([master], [], [], 30)[0]:
    data += os.read(master, 65536)
t.join(30)
assert data[:n] == b"x" * n
print(out["mr"].kind, data[n:].decode().strip())
out["mr"].close()
"""


def test_resource_creation_releases_the_gil():
    """Resource(spec) creates the resource with the GIL released, as default_resource() does:
    here the creation blocks (a log layer writing its header to a full pty) until another Python
    thread of the process reads the pty. It held the GIL: the reader never ran, the child hung."""
    import subprocess
    import sys

    if os.uname().machine not in ("x86_64", "aarch64") or not os.path.exists("/proc/self/task"):
        pytest.skip("reads the thread's system call in /proc (Linux on x86_64 or aarch64)")
    try:
        done = subprocess.run([sys.executable, "-c", _CREATION_HELD], capture_output=True,
                              text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the other thread never ran while Resource() was being created")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "log Thread,Time,Action,Pointer,Size,Stream\n"
