"""Buffer.from_handle(ptr, size, mr=None, owner=None, *, stream=None): memory memres did not
allocate as a Buffer, with cuda.core's ownership rules: a view frees nothing, an owner is kept
alive until the close, an mr's deallocate is called once at the close, on the close's stream."""
import ctypes
import gc
import sys
import time
import weakref

import pytest

import memres
from conftest import MODE


class Stream:
    """A stream object of the cuda.core protocol (the legacy default stream)."""

    def __cuda_stream__(self):
        return (0, 0)


class RecordingMR:
    """A user's MemoryResource (cuda.core's protocol): deallocate records its calls."""

    is_device_accessible = False
    is_host_accessible = True
    device_id = -1

    def __init__(self, fail=False):
        self.calls = []
        self.fail = fail

    def deallocate(self, ptr, size, *, stream):
        self.calls.append((ptr, size, stream))
        if self.fail:
            raise RuntimeError("deallocate failed on purpose")


@pytest.fixture
def memory():
    """64 bytes of host memory that outlive the test's buffers, and their address."""
    arr = ctypes.create_string_buffer(b"\x11" * 64, 64)
    return arr, ctypes.addressof(arr)


def test_view_frees_nothing(memory):
    arr, addr = memory
    buf = memres.Buffer.from_handle(addr, 64)
    assert isinstance(buf, memres.Buffer) and type(buf) is memres.ForeignBuffer
    assert (buf.size, buf.handle, buf.device_id) == (64, addr, -1)
    assert buf.is_host_accessible and not buf.is_device_accessible
    assert buf.memory_resource is None and buf.owner is None
    # repr names the type (it said memres.Buffer)
    assert repr(buf) == "<memres.ForeignBuffer 64 bytes at 0x%x on device -1>" % addr
    buf.fill(0xAB)
    assert arr.raw == b"\xab" * 64
    assert buf.read(0, 4) == b"\xab" * 4
    buf.close()
    buf.close()  # twice is fine
    assert buf.closed and buf.size == 0 and buf.handle == 0
    assert repr(buf) == "<memres.ForeignBuffer closed>"
    assert arr.raw == b"\xab" * 64  # nothing freed, nothing written
    with memres.Buffer.from_handle(addr, 64) as view:
        view.write(b"xyz")
    assert view.closed and arr.raw[:3] == b"xyz"
    # dropped open: a view still frees nothing
    memres.Buffer.from_handle(addr, 64)
    gc.collect()
    assert arr.raw[:3] == b"xyz"


def test_owner_kept_until_close(memory):
    arr, addr = memory

    class Holder:
        pass

    holder = Holder()
    ref = weakref.ref(holder)
    buf = memres.Buffer.from_handle(addr, 64, owner=holder)
    del holder
    gc.collect()
    assert ref() is not None and buf.owner is ref() and buf.memory_resource is None
    buf.close()
    gc.collect()
    assert ref() is None and buf.owner is None
    # dropped open: the owner goes with the buffer
    holder = Holder()
    ref = weakref.ref(holder)
    memres.Buffer.from_handle(addr, 64, owner=holder)
    del holder
    gc.collect()
    assert ref() is None


def test_mr_deallocates_once(memory):
    _, addr = memory
    mr = RecordingMR()
    buf = memres.Buffer.from_handle(addr, 64, mr=mr)
    assert buf.memory_resource is mr and buf.owner is None
    assert buf.is_host_accessible and not buf.is_device_accessible and buf.device_id == -1
    assert mr.calls == []
    buf.close()
    assert mr.calls == [(addr, 64, None)]
    buf.close()
    assert mr.calls == [(addr, 64, None)] and buf.memory_resource is None
    # the stream given to from_handle, or the close's, is the one deallocate gets
    first, second = Stream(), Stream()
    buf = memres.Buffer.from_handle(addr, 64, mr=mr, stream=first)
    buf.close()
    assert mr.calls[-1] == (addr, 64, first)
    buf = memres.Buffer.from_handle(addr, 32, mr=mr, stream=first)
    buf.close(stream=second)
    assert mr.calls[-1] == (addr, 32, second)
    # a with block and a buffer dropped open each deallocate once
    with memres.Buffer.from_handle(addr, 16, mr=mr):
        pass
    assert mr.calls[-1] == (addr, 16, None)
    memres.Buffer.from_handle(addr, 8, mr=mr)
    gc.collect()
    assert mr.calls[-1] == (addr, 8, None) and len(mr.calls) == 5


def test_set_deallocation_stream(memory):
    # cuda.core's Buffer.set_deallocation_stream: the stream a close without one (and a buffer
    # dropped open) frees on; it was missing (AttributeError)
    _, addr = memory
    mr = RecordingMR()
    first, second, third = Stream(), Stream(), Stream()
    buf = memres.Buffer.from_handle(addr, 64, mr=mr, stream=first)
    assert buf.set_deallocation_stream(second) is None
    buf.close()
    assert mr.calls == [(addr, 64, second)]
    buf = memres.Buffer.from_handle(addr, 32, mr=mr)
    buf.set_deallocation_stream(stream=third)
    del buf
    gc.collect()
    assert mr.calls[-1] == (addr, 32, third) and len(mr.calls) == 2
    # the close's own stream still wins
    buf = memres.Buffer.from_handle(addr, 16, mr=mr)
    buf.set_deallocation_stream(first)
    buf.close(stream=second)
    assert mr.calls[-1] == (addr, 16, second)
    with pytest.raises(memres.ClosedError):
        buf.set_deallocation_stream(first)
    with pytest.raises(TypeError):
        memres.Buffer.from_handle(addr, 8).set_deallocation_stream()
    # a buffer memres allocated takes it too, and refuses it once closed
    own = memres.Resource("host").allocate(8)
    own.set_deallocation_stream(None)
    own.close()
    with pytest.raises(memres.ClosedError) as info:
        own.set_deallocation_stream(None)
    assert info.value.code == memres.ErrorCode.CLOSED
    assert len(mr.calls) == 3


def test_mr_deallocate_error(memory, monkeypatch):
    _, addr = memory
    mr = RecordingMR(fail=True)
    buf = memres.Buffer.from_handle(addr, 64, mr=mr)
    with pytest.raises(RuntimeError, match="deallocate failed on purpose"):
        buf.close()
    assert buf.closed and len(mr.calls) == 1
    buf.close()  # closed: not again
    assert len(mr.calls) == 1
    with pytest.raises(RuntimeError, match="on purpose"):
        with memres.Buffer.from_handle(addr, 64, mr=mr):
            pass
    # where nobody can catch it (a buffer dropped open): sys.unraisablehook
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    memres.Buffer.from_handle(addr, 64, mr=mr)
    gc.collect()
    assert len(seen) == 1 and isinstance(seen[0].exc_value, RuntimeError)
    assert seen[0].object is mr and len(mr.calls) == 3


def test_mr_under_dlpack(memory):
    """Closed while a DLPack consumer holds it: deallocate runs when the last tensor goes, on
    the close's stream."""
    _, addr = memory
    mr = RecordingMR()
    stream = Stream()
    buf = memres.Buffer.from_handle(addr, 64, mr=mr)
    capsule = buf.__dlpack__()
    buf.close(stream=stream)
    assert buf.closed and mr.calls == []
    del capsule
    gc.collect()
    assert mr.calls == [(addr, 64, stream)]


def test_mr_flags(memory):
    _, addr = memory

    class DeviceMR(RecordingMR):
        is_device_accessible = True
        is_host_accessible = False
        device_id = 0

    class ManagedMR(DeviceMR):
        is_host_accessible = True
        is_managed = True

    if MODE != "host":
        buf = memres.Buffer.from_handle(addr, 64, mr=DeviceMR())
        assert buf.is_device_accessible and not buf.is_host_accessible and buf.device_id == 0
        buf.close()
    buf = memres.Buffer.from_handle(addr, 64, mr=ManagedMR())
    assert buf.is_device_accessible and buf.is_host_accessible
    assert buf.flags & memres.MemoryFlags.MANAGED
    buf.close()

    class Neither(RecordingMR):
        is_host_accessible = False

    with pytest.raises(ValueError, match="neither device- nor host-accessible"):
        memres.Buffer.from_handle(addr, 64, mr=Neither())


def test_cuda_core_names(host, memory):
    """cuda.core's Buffer names: is_closed beside closed, owner (None for memory a Resource
    allocated)."""
    _, addr = memory
    buf = host.allocate(8)
    assert buf.owner is None and buf.is_closed is False
    buf.close()
    assert buf.is_closed is True and buf.closed is True
    view = memres.Buffer.from_handle(addr, 8)
    assert view.is_closed is False
    view.close()
    assert view.is_closed is True


def test_errors(memory):
    _, addr = memory
    mr = RecordingMR()
    with pytest.raises(ValueError, match="not both"):
        memres.Buffer.from_handle(addr, 64, mr=mr, owner=object())
    with pytest.raises(ValueError, match="it needs mr"):
        memres.Buffer.from_handle(addr, 64, stream=Stream())
    with pytest.raises(TypeError, match="deallocate"):
        memres.Buffer.from_handle(addr, 64, mr=memres.Resource("host"))
    with pytest.raises(TypeError, match="keyword-only"):
        memres.Buffer.from_handle(addr, 64, mr, None, Stream())
    with pytest.raises(TypeError, match="must be ints"):
        memres.Buffer.from_handle("0x10", 64)
    for ptr, size in ((-1, 8), (addr, -1), (1 << 64, 8)):
        with pytest.raises(OverflowError):
            memres.Buffer.from_handle(ptr, size)
    for ptr, size in ((0, 8), ((1 << 64) - 8, 16)):
        with pytest.raises(memres.InvalidArgumentError) as info:
            memres.Buffer.from_handle(ptr, size, mr=mr)
        assert isinstance(info.value, ValueError)
        assert (info.value.domain, info.value.code) == ("memres-error-quark",
                                                        memres.ErrorCode.INVALID_ARGUMENT)
    assert mr.calls == []  # refused: nothing given back
    empty = memres.Buffer.from_handle(0, 0)
    assert empty.size == 0
    empty.close()
    with pytest.raises(TypeError):
        memres.ForeignBuffer()
    with pytest.raises(TypeError, match="Buffer.from_handle"):
        memres.Buffer()


def test_device_pointer(device, fake_counts):
    """Device memory from another allocator (here a memres buffer): the driver says what it is;
    a view's close frees nothing of it."""
    owner_buf = device.allocate(4096)
    before = fake_counts()
    view = memres.Buffer.from_handle(owner_buf.handle, 4096)
    assert view.is_device_accessible and not view.is_host_accessible and view.device_id == 0
    view.fill(0x5C)
    view.close()
    assert owner_buf.read(0, 8) == b"\x5c" * 8
    assert fake_counts() == before
    owner_buf.close()


def test_threads_close_and_read(memory):
    """A ForeignBuffer's shared state (the owner, the stream deallocate gets, whether the release
    ran) is read and changed under its own lock, and which close() an exception of deallocate
    goes to is decided per thread, so that closes, getters and releases on several threads at
    once hold without the GIL (the package declares Py_MOD_GIL_NOT_USED on a free-threaded
    CPython). With the GIL this checks the same rules: deallocate runs once per buffer, on the
    thread of a close, with that close's stream; only that close raises deallocate's exception;
    every other close returns None or raises BufferError ("another thread is closing it"); the
    getters answer the mr/owner or None, never a freed object."""
    import threading

    _, addr = memory
    n_threads, rounds = 8, 150

    class ThreadMR(RecordingMR):
        def deallocate(self, ptr, size, *, stream):
            self.calls.append((ptr, size, stream, threading.get_ident()))
            time.sleep(0)  # let the other threads run inside the release
            if self.fail:
                raise RuntimeError("deallocate failed on purpose")

    for round_ in range(rounds):
        fail = round_ % 3 == 0
        mr = ThreadMR(fail=fail)
        owner = object()
        with_mr = round_ % 2 == 0
        buf = (memres.Buffer.from_handle(addr, 64, mr=mr) if with_mr
               else memres.Buffer.from_handle(addr, 64, owner=owner))
        barrier = threading.Barrier(n_threads)
        results = {}

        def closer(i):
            stream = Stream()
            barrier.wait()
            if i % 2:  # readers
                for _ in range(20):
                    got = buf.memory_resource if with_mr else buf.owner
                    assert got is None or got is (mr if with_mr else owner)
                results[i] = ("read", None, stream)
                return
            try:
                buf.close(stream=stream)
                results[i] = ("none", None, stream)
            except RuntimeError as err:
                results[i] = ("raised", err, stream)
            except BufferError as err:
                assert "another thread is closing it" in str(err)
                results[i] = ("busy", err, stream)

        threads = [threading.Thread(target=closer, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert buf.closed and buf.memory_resource is None and buf.owner is None
        raised = [r for r in results.values() if r[0] == "raised"]
        if not with_mr:
            assert mr.calls == [] and raised == []
            continue
        assert len(mr.calls) == 1, mr.calls
        ptr, size, stream, ident = mr.calls[0]
        assert (ptr, size) == (addr, 64)
        ran = [i for i, t in enumerate(threads) if t.ident == ident]
        assert len(ran) == 1 and ran[0] % 2 == 0
        assert stream is results[ran[0]][2]
        if fail:
            assert results[ran[0]][0] == "raised" and len(raised) == 1
        else:
            assert results[ran[0]][0] == "none" and raised == []


def test_close_inside_deallocate(memory):
    """A deallocate that closes another foreign buffer: the inner close raises its own
    deallocate's exception (to the outer deallocate, which catches it), the outer close gets
    nothing of it; a failing outer deallocate raises in the outer close only."""
    _, addr = memory
    inner_mr = RecordingMR(fail=True)
    inner = memres.Buffer.from_handle(addr, 16, mr=inner_mr)
    caught = []

    class OuterMR(RecordingMR):
        def deallocate(self, ptr, size, *, stream):
            self.calls.append((ptr, size, stream))
            try:
                inner.close()
            except RuntimeError as err:
                caught.append(err)
            if self.fail:
                raise KeyError("outer failed on purpose")

    outer = memres.Buffer.from_handle(addr, 64, mr=OuterMR())
    outer.close()
    assert len(caught) == 1 and "on purpose" in str(caught[0])
    assert inner.closed and len(inner_mr.calls) == 1
    inner = memres.Buffer.from_handle(addr, 16, mr=inner_mr)
    outer = memres.Buffer.from_handle(addr, 64, mr=OuterMR(fail=True))
    with pytest.raises(KeyError, match="outer failed"):
        outer.close()
    assert len(caught) == 2 and outer.closed and inner.closed


def test_mr_describes_device_memory_as_host(device):
    """An mr that did not allocate ptr and says its memory is host memory, over device memory
    (a PinnedMemoryResource handed a device pointer): the driver's word wins, InvalidArgumentError
    (a memoryview of it would read device memory from the host: a segfault on a GPU); described
    as on another device, code WRONG_DEVICE (C test /dmr/wrap/driver-disagrees); deallocate is
    never called."""
    owner_buf = device.allocate(4096)
    owner_buf.fill(0x2D)

    class HostMR(RecordingMR):  # host-accessible, device -1
        pass

    class ManagedLie(RecordingMR):
        is_device_accessible = True
        is_host_accessible = True

    for mr in (HostMR(), ManagedLie()):
        with pytest.raises(memres.InvalidArgumentError, match="device memory of device 0") as info:
            memres.Buffer.from_handle(owner_buf.handle, 4096, mr=mr)
        assert (info.value.domain, info.value.code) == ("memres-error-quark",
                                                        memres.ErrorCode.INVALID_ARGUMENT)
        assert mr.calls == []

    class DeviceMR(RecordingMR):
        is_device_accessible = True
        is_host_accessible = False
        device_id = 0

    mr = DeviceMR()
    buf = memres.Buffer.from_handle(owner_buf.handle, 4096, mr=mr)
    assert buf.read(0, 4) == b"\x2d" * 4
    buf.close()
    assert mr.calls == [(owner_buf.handle, 4096, None)]
    owner_buf.close()


def test_cycles_through_foreign_buffers_are_collected(memory):
    # an owner that holds its buffer, and an mr that keeps its buffers (a pool's list), made
    # cycles through the ForeignBuffer, which the garbage collector could not see: the objects
    # lived until exit and mr.deallocate() never ran. Now each is collected, deallocate runs
    # once per buffer with the mr whole (before any object of the cycle is cleared).
    arr, addr = memory

    class Owner:
        pass

    owners = []
    for _ in range(100):
        owner = Owner()
        owner.buf = memres.Buffer.from_handle(addr, 64, owner=owner)
        owners.append(weakref.ref(owner))
        del owner
    gc.collect()
    assert [ref() for ref in owners] == [None] * 100

    class Pool:
        is_device_accessible, is_host_accessible, device_id = False, True, -1

        def __init__(self):
            self.buffers, self.state = [], "whole"

        def deallocate(self, ptr, size, *, stream):
            freed.append((ptr, size, stream, self.state, len(self.buffers)))

    freed = []
    pool = Pool()
    for _ in range(10):
        pool.buffers.append(memres.Buffer.from_handle(addr, 64, mr=pool))
    pool_ref = weakref.ref(pool)
    del pool
    gc.collect()
    assert pool_ref() is None
    assert freed == [(addr, 64, None, "whole", 10)] * 10
    assert arr.raw == b"\x11" * 64  # nothing written
