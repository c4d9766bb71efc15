"""DLPack (versioned and legacy capsules), the CUDA array interface, from_dlpack."""
import ctypes

import numpy
import pytest

import memres

PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
PyCapsule_GetPointer.restype = ctypes.c_void_p
PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
PyCapsule_SetName = ctypes.pythonapi.PyCapsule_SetName
PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [
    ("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def consume_versioned(capsule):
    """A small DLPack 1.x consumer: takes the tensor, renames the capsule as used, returns the
    tensor (the caller calls its deleter)."""
    ptr = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    assert PyCapsule_SetName(capsule, b"used_dltensor_versioned") == 0
    return ctypes.cast(ptr, ctypes.POINTER(DLManagedTensorVersioned)).contents


def test_versioned_capsule(host):
    buf = host.allocate(64)
    capsule = buf.__dlpack__(max_version=(1, 0))
    assert PyCapsule_IsValid(capsule, b"dltensor_versioned")
    t = consume_versioned(capsule)
    assert (t.major, t.minor) == (1, 0) and t.flags == 0
    d = t.dl_tensor
    assert d.data == buf.handle and d.ndim == 1 and d.shape[0] == 64 and d.byte_offset == 0
    assert (d.dtype.code, d.dtype.bits, d.dtype.lanes) == (1, 8, 1)
    assert (d.device.device_type, d.device.device_id) == (1, 0)
    # consumed: a second consumer is refused
    with pytest.raises(ValueError):
        PyCapsule_GetPointer(capsule, b"dltensor_versioned")
    with pytest.raises(ValueError):
        memres.from_dlpack(capsule)
    t.deleter(ctypes.pointer(t))
    buf.close()


def test_legacy_capsule(host):
    buf = host.allocate(8)
    for capsule in (buf.__dlpack__(), buf.__dlpack__(max_version=(0, 8)),
                    buf.__dlpack__(stream=None, max_version=None)):
        assert PyCapsule_IsValid(capsule, b"dltensor")
    del capsule  # unconsumed capsules give their tensor back
    buf.close()


def test_dlpack_arguments(host):
    buf = host.allocate(8)
    assert buf.__dlpack_device__() == (1, 0)
    buf.__dlpack__(dl_device=(1, 0), copy=False, stream=None)
    with pytest.raises(BufferError, match="memres copies only to host memory"):
        buf.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="memres copies only to host memory"):
        buf.__dlpack__(dl_device=(2, 0), copy=True)
    with pytest.raises(TypeError):
        buf.__dlpack__(None)
    # a malformed max_version is BufferError, as cuda.core raises (it was TypeError)
    for bad in (1, (), (1,), (1, 0, 0), [1, 0], (1.0, 0), ("1", "0"), (1, None)):
        with pytest.raises(BufferError, match="max_version must be None or a \\(major, minor\\)"):
            buf.__dlpack__(max_version=bad)
    # a major past any version: the newest capsule memres has; a negative one: the legacy
    assert PyCapsule_IsValid(buf.__dlpack__(max_version=(1 << 80, 0)), b"dltensor_versioned")
    assert PyCapsule_IsValid(buf.__dlpack__(max_version=(-(1 << 80), 0)), b"dltensor")
    with pytest.raises(ValueError):
        buf.__dlpack__(stream=0)
    # below -1 and above 2**64 - 1 no stream: they were taken as stream handles
    for bad in (-2, -(1 << 70), 1 << 64, 1 << 70):
        with pytest.raises(ValueError, match="stream must be -1"):
            buf.__dlpack__(stream=bad)
    buf.close()


def test_dlpack_copy_and_stream_types(host):
    """copy is a bool or None (the array API's signature), not taken by its truthiness:
    copy="yes" or copy=1 made a copy; a bool is no stream (True was the legacy default stream
    1): TypeError for each."""
    buf = host.allocate(8)
    for bad in ("yes", "", 1, 0, 1.0, [], (True,)):
        with pytest.raises(TypeError, match="copy must be a bool or None"):
            buf.__dlpack__(copy=bad)
    for bad in (True, False):
        with pytest.raises(TypeError, match="stream must be an int or None, not a bool"):
            buf.__dlpack__(stream=bad)
        with pytest.raises(TypeError, match="stream must be an int or None, not a bool"):
            buf.__dlpack__(stream=bad, dl_device=(1, 0), copy=True)
    for bad in ("1", 1.0, object()):
        with pytest.raises(TypeError, match="stream must be an int or None"):
            buf.__dlpack__(stream=bad)
    # the bools themselves still work
    data, flags, _ = copied_bytes(buf.__dlpack__(max_version=(1, 0), copy=True), 8)
    assert flags == 2 and len(data) == 8
    assert PyCapsule_IsValid(buf.__dlpack__(max_version=(1, 0), copy=False), b"dltensor_versioned")
    buf.close()


def test_dlpack_cpu_stream_must_be_none(host):
    """The array API: "On CPU and other device types without streams, only None is accepted",
    and with dl_device=(kDLCPU, 0) "stream must be None". A host buffer's export, or any
    export to dl_device=(1, 0), refuses another stream (-1 and a handle included) with
    BufferError; they were taken, and the stream ignored."""
    buf = host.allocate(8)
    for stream in (-1, 1, 2, 0x1234, (1 << 64) - 1):
        for kwargs in ({}, {"max_version": (1, 0)}, {"dl_device": (1, 0)},
                       {"dl_device": (1, 0), "copy": True}, {"copy": False}):
            with pytest.raises(BufferError, match="kDLCPU.*stream must be None"):
                buf.__dlpack__(stream=stream, **kwargs)
    # None is taken
    assert PyCapsule_IsValid(buf.__dlpack__(stream=None), b"dltensor")
    assert PyCapsule_IsValid(buf.__dlpack__(stream=None, dl_device=(1, 0)), b"dltensor")
    buf.close()


def copied_bytes(capsule, size):
    """The bytes and the flags of a copy's versioned capsule (the tensor given back)."""
    t = consume_versioned(capsule)
    d = t.dl_tensor
    assert (d.device.device_type, d.device.device_id) == (1, 0) and d.shape[0] == size
    got = ctypes.string_at(d.data, size), t.flags, d.data
    t.deleter(ctypes.pointer(t))
    return got


def test_dlpack_copy_true_copies(host):
    """copy=True: always a copy (the array API), host memory of its own, flagged IS_COPIED (it
    was BufferError)."""
    buf = host.allocate(16)
    buf.write(bytes(range(16)))
    data, flags, address = copied_bytes(buf.__dlpack__(max_version=(1, 0), copy=True), 16)
    assert data == bytes(range(16)) and flags == 2 and address != buf.handle
    buf.close()  # the copy was made for the consumer: the buffer is not exported
    assert buf.closed


def test_dlpack_device_to_cpu_copies(device, fake_counts):
    """dl_device=(kDLCPU, 0) of device memory: a copy in host memory unless copy=False, which
    is BufferError (the array API's rule; it was BufferError whatever copy said)."""
    buf = device.allocate(4096)
    buf.fill(0x5A)
    assert buf.__dlpack_device__() == (2, 0)
    before = fake_counts()
    data, flags, address = copied_bytes(buf.__dlpack__(dl_device=(1, 0), max_version=(1, 0)),
                                        4096)
    assert data == b"\x5a" * 4096 and flags == 2 and address != buf.handle
    assert fake_counts() == before  # nothing of the driver's held by the copy
    legacy = buf.__dlpack__(dl_device=(1, 0))  # no max_version: the legacy capsule, a copy
    assert PyCapsule_IsValid(legacy, b"dltensor")
    del legacy
    with pytest.raises(BufferError, match="copy=False forbids it"):
        buf.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="copy=True needs dl_device=\\(1, 0\\)"):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="not on the dl_device"):
        buf.__dlpack__(dl_device=(2, 1))
    buf.close()
    assert buf.closed and fake_counts()["pool_allocations"] == before["pool_allocations"] - 1


@pytest.mark.parametrize("spec", ["pinned", "managed:device=0"])
def test_dlpack_host_accessible_to_cpu_without_copy(device, fake_counts, spec):
    """dl_device=(kDLCPU, 0) of memory the CPU reaches (pinned, managed) needs no copy: the
    buffer's own memory, on (1, 0), flags 0, read after its stream's work (synchronized). It
    was a copy (IS_COPIED, another address), and with copy=False a BufferError ("takes a
    copy"), which NumPy 2's from_dlpack(buf, device="cpu", copy=False) raises."""
    import os

    count = ctypes.CDLL(os.environ["MEMRES_CUDA_DRIVER"]).fakecuda_call_count
    count.restype = ctypes.c_long
    buf = memres.Resource(spec).allocate(64, stream=2)
    buf.fill(0x33, stream=2)
    for copy in (None, False):
        syncs = count(b"cuStreamSynchronize") + count(b"cuCtxSynchronize")
        t = consume_versioned(buf.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=copy))
        d = t.dl_tensor
        assert (d.device.device_type, d.device.device_id) == (1, 0)
        assert d.data == buf.handle and t.flags == 0 and d.shape[0] == 64
        assert ctypes.string_at(d.data, 64) == b"\x33" * 64
        assert count(b"cuStreamSynchronize") + count(b"cuCtxSynchronize") > syncs
        t.deleter(ctypes.pointer(t))
    legacy = memres.from_dlpack(buf.__dlpack__(dl_device=(1, 0), copy=False))
    assert legacy.handle == buf.handle and legacy.__dlpack_device__() == (1, 0)
    assert legacy.read() == b"\x33" * 64
    legacy.close()
    # copy=True still copies
    data, flags, address = copied_bytes(
        buf.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True), 64)
    assert data == b"\x33" * 64 and flags == 2 and address != buf.handle
    buf.close()


@pytest.mark.parametrize("spec", ["pinned", "managed:device=0"])
def test_numpy_reads_host_accessible_memory_after_its_stream(device, fake_counts, spec):
    """NumPy's from_dlpack (no dl_device, stream None) takes pinned (kDLCUDAHost) and managed
    memory as it is and reads it on the CPU at once: the export waits for the buffer's stream
    first, as the DLPack spec asks of a producer for the CPU. It gave the capsule at once, and
    NumPy read the bytes from before the fill queued on the held stream."""
    import threading
    import time

    from fakestream import FakeStreamHold

    mr = memres.Resource(spec)
    before = fake_counts()
    hold = FakeStreamHold()
    try:
        buf = mr.allocate(4096, stream=hold.stream.value)
        buf.write(b"\x11" * 4096)
        hold.hold()
        buf.fill(0x5C, stream=hold.stream.value)  # queued behind the wait
        out = {}

        def consumer():
            try:
                out["bytes"] = numpy.from_dlpack(buf).tobytes()
            except Exception as err:  # noqa: BLE001 (checked below)
                out["error"] = err

        count = hold.lib.fakecuda_call_count
        count.restype = ctypes.c_long
        syncs = count(b"cuStreamSynchronize") + count(b"cuCtxSynchronize")
        t = threading.Thread(target=consumer)
        t.start()
        deadline = time.monotonic() + 30
        while (count(b"cuStreamSynchronize") + count(b"cuCtxSynchronize") == syncs
               and t.is_alive() and time.monotonic() < deadline):
            time.sleep(0.005)
        hold.release()
        t.join(30)
        assert out == {"bytes": b"\x5c" * 4096}
        buf.close()
    finally:
        hold.close()
    assert fake_counts()["streams"] == before["streams"]


def test_numpy_consumes_host_memory(host):
    buf = host.allocate(256)
    buf.fill(7)
    array = numpy.from_dlpack(buf)
    assert array.dtype == numpy.uint8 and array.shape == (256,)
    assert (array == 7).all()
    buf.write(b"\x01\x02\x03\x04")  # the same memory (NumPy marks DLPack imports read-only)
    assert list(array[:5]) == [1, 2, 3, 4, 7]
    assert array.__array_interface__["data"][0] == buf.handle
    del array
    buf.close()


def test_from_dlpack_round_trip(host):
    buf = host.allocate(32)
    buf.fill(5)
    wrapped = memres.from_dlpack(buf)
    assert wrapped.handle == buf.handle and wrapped.size == 32
    assert wrapped.memory_resource is None
    assert wrapped.read() == b"\x05" * 32
    wrapped.close()  # gives the tensor back; the memory is still buf's
    assert buf.read(0, 1) == b"\x05"
    buf.close()


def test_from_dlpack_legacy_capsule(host):
    buf = host.allocate(8)
    buf.fill(4)
    wrapped = memres.from_dlpack(buf.__dlpack__())  # a legacy capsule, adopted
    assert wrapped.read() == b"\x04" * 8
    wrapped.close()
    buf.close()


def test_cuda_array_interface_host(host):
    buf = host.allocate(8)
    assert not hasattr(buf, "__cuda_array_interface__")
    buf.close()


def test_cuda_array_interface_device(device):
    buf = device.allocate(1024)
    cai = buf.__cuda_array_interface__
    assert cai == {"shape": (1024,), "typestr": "|u1", "data": (buf.handle, False),
                   "strides": None, "version": 3, "stream": 1}
    assert buf.__dlpack_device__() == (2, 0)
    t = consume_versioned(buf.__dlpack__(max_version=(1, 0), stream=1))
    assert (t.dl_tensor.device.device_type, t.dl_tensor.device.device_id) == (2, 0)
    t.deleter(ctypes.pointer(t))
    buf.close()
