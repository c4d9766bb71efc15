"""DLPack between memres and the array libraries through the package (Buffer.__dlpack__,
memres.from_dlpack; moved from the ctypes suite's tests/python/test_dlpack.py):
- a memres device buffer read by torch.from_dlpack, cupy.from_dlpack and jax.dlpack.from_dlpack
  (when JAX sees the GPU; a JAX that asks for no DLPack version gets the unversioned "dltensor"
  capsule) without a copy: the same device pointer, the bytes memres wrote, and a write through
  torch (through strides) seen by memres; the consumer's tensor keeps the memory after the
  Buffer object is gone, and the memory is freed once, when the last consumer lets go;
- a torch (and CuPy) array wrapped into a memres buffer: the same pointer, its bytes read back
  through memres, and the producer's memory released when the buffer closes;
- capsules nobody consumes, versioned and unversioned: the memory goes when they die.

Run by test_frameworks.py in a fresh interpreter on the GPU. Exits 77 (skipped) without torch
and CuPy, or without a CUDA device."""

import array
import gc
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: no 75% grab

import memres  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None

N = 4096
KDL_CUDA = 2


def gpu_available():
    if torch is not None and torch.cuda.is_available():
        return True
    if cupy is not None:
        try:
            return cupy.cuda.runtime.getDeviceCount() > 0
        except cupy.cuda.runtime.CUDARuntimeError:
            return False
    return False


def wait_for(cond, seconds=5.0):
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        if cond() or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def expected_floats(offset=0.0):
    return array.array("f", (float(i) + offset for i in range(N))).tobytes()


class Recording:
    """Hands a buffer's capsules to a consumer and notes which DLPack version each was."""

    def __init__(self, buf):
        self.buf, self.versions = buf, []

    def __dlpack_device__(self):
        return self.buf.__dlpack_device__()

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.versions.append("1.x" if max_version and max_version[0] >= 1 else "0.x")
        return self.buf.__dlpack__(stream=stream, max_version=max_version)


def n_buffers(mr):
    return mr.stats()["n_buffers"]


def export_case(mr, consumer, name):
    """A memres buffer of N float32 [0, 1, 2...] read by @consumer, which returns
    (pointer, object, read): the consumer's object holds the memory once the Buffer object is
    dropped; its bytes are read after that; dropping it frees the buffer, once."""
    buf = mr.allocate(N * 4)
    buf.write(expected_floats())
    assert buf.__dlpack_device__() == (KDL_CUDA, 0), buf.__dlpack_device__()
    address = buf.handle
    n_before = n_buffers(mr)
    producer = Recording(buf)
    ptr, obj, read = consumer(producer)
    del buf, producer.buf  # the consumer's tensor keeps the memory now
    gc.collect()
    assert n_buffers(mr) == n_before, "the buffer went with the Buffer object"
    assert ptr == address, f"{name}: {ptr:#x} != {address:#x} (a copy)"
    assert read(obj) == expected_floats(), f"{name}: the bytes differ"
    del obj
    wait_for(lambda: n_buffers(mr) < n_before)  # JAX may release its buffers a little later
    assert n_buffers(mr) == n_before - 1, f"{name}: {n_buffers(mr)} buffers, {n_before} before"
    versions = ", ".join(producer.versions)
    del producer
    gc.collect()
    assert n_buffers(mr) == n_before - 1, mr.stats()
    print(f"{name}: read a memres buffer at {ptr:#x} without a copy (DLPack {versions}); "
          "freed once")


def torch_bytes(t):
    return t.contiguous().cpu().numpy().tobytes()


def torch_consumer(producer):
    t = torch.from_dlpack(producer)
    assert t.is_cuda and t.dtype == torch.uint8 and t.shape == (N * 4,)
    return t.data_ptr(), t.view(torch.float32), torch_bytes


def cupy_consumer(producer):
    a = cupy.from_dlpack(producer)
    assert a.dtype == cupy.uint8 and a.shape == (N * 4,)
    return a.data.ptr, a, lambda x: cupy.asnumpy(x).tobytes()


def jax_consumer(producer):
    import jax
    import numpy

    a = jax.dlpack.from_dlpack(producer)
    assert producer.versions, "JAX did not call __dlpack__"
    if hasattr(a, "unsafe_buffer_pointer"):
        ptr = a.unsafe_buffer_pointer()
    else:
        ptr = a.__cuda_array_interface__["data"][0]
    return ptr, a, lambda x: numpy.asarray(x).tobytes()


def unconsumed_case(mr):
    """Capsules nobody consumes: each kind ("dltensor_versioned" for max_version >= (1, 0),
    "dltensor" for none or below) deletes its tensor once when it dies, and the buffer goes."""
    for kwargs, name in (({"max_version": (1, 0)}, "dltensor_versioned"),
                         ({"max_version": (1, 3)}, "dltensor_versioned"),
                         ({}, "dltensor"),
                         ({"max_version": (0, 8)}, "dltensor")):
        n_before = n_buffers(mr)
        buf = mr.allocate(N * 4)
        capsule = buf.__dlpack__(**kwargs)
        del buf  # the capsule's tensor keeps the memory now
        gc.collect()
        assert '"%s"' % name in repr(capsule), f"{kwargs}: {capsule!r} is not a {name} capsule"
        assert n_buffers(mr) == n_before + 1
        del capsule
        gc.collect()
        assert n_buffers(mr) == n_before, mr.stats()
    print("unconsumed capsules (versioned and unversioned): freed once each")


def write_through_torch(mr):
    """A write by torch into the exported memory is what memres reads: one memory."""
    buf = mr.allocate(N * 4)
    buf.write(expected_floats())
    t = torch.from_dlpack(buf).view(torch.float32).reshape(64, 64).t()  # strides (1, 64)
    ref = torch.arange(N, dtype=torch.float32).reshape(64, 64).t()
    torch.testing.assert_close(t.cpu(), ref)
    t.add_(1.0)
    torch.cuda.synchronize()
    assert buf.read() == expected_floats(1.0)
    del t
    gc.collect()
    buf.close()
    print("torch wrote into a memres buffer through strides (64, 64)/(1, 64); memres read it")


def wrap_case(name, make, to_bytes, sync, allocated):
    """@make() builds an array; memres.from_dlpack wraps it as a Buffer that reads back its bytes
    at its pointer; the producer's memory is released when the buffer closes."""
    arr = make()
    expected = to_bytes(arr)
    ptr = arr.data_ptr() if hasattr(arr, "data_ptr") else arr.data.ptr
    buf = memres.from_dlpack(arr)
    del arr
    gc.collect()
    held = allocated()
    assert buf.handle == ptr, f"{name}: {buf.handle:#x} != {ptr:#x}"
    assert buf.size == len(expected)
    assert buf.device_id == 0 and buf.is_device_accessible
    assert buf.read() == expected, f"{name}: the bytes differ"
    assert buf.memory_resource is None  # foreign memory
    buf.close()
    gc.collect()
    sync()
    if held is not None:
        assert allocated() < held, f"{name}: the producer's memory was not released"
    buf.close()  # closing twice does nothing: the producer's deleter ran once
    print(f"{name}: its tensor wrapped as a memres buffer at {ptr:#x}, read back; released")


def main():
    if torch is None and cupy is None:
        print("neither torch nor cupy is importable")
        sys.exit(77)
    if not gpu_available():
        print("no CUDA device")
        sys.exit(77)
    mr = memres.Resource("dmr:device=0")
    unconsumed_case(mr)

    if torch is not None:
        export_case(mr, torch_consumer, "torch.from_dlpack")
        write_through_torch(mr)
        wrap_case("torch", lambda: torch.arange(1 << 20, dtype=torch.int32, device="cuda") * 3,
                  torch_bytes, torch.cuda.synchronize, torch.cuda.memory_allocated)
    if cupy is not None:
        export_case(mr, cupy_consumer, "cupy.from_dlpack")
        pool = cupy.get_default_memory_pool()
        wrap_case("cupy", lambda: cupy.arange(1 << 20, dtype=cupy.int32) * 3,
                  lambda a: cupy.asnumpy(a).tobytes(), cupy.cuda.Device(0).synchronize,
                  pool.used_bytes)
    try:
        import jax

        gpus = [d for d in jax.devices() if d.platform == "gpu"]
    except Exception as e:  # not installed, or no GPU backend
        gpus = []
        print(f"jax: not run ({type(e).__name__}: {e})")
    if gpus:
        export_case(mr, jax_consumer, "jax.dlpack.from_dlpack")
    elif "jax" in sys.modules:
        print("jax: not run (JAX sees no GPU)")

    gc.collect()
    assert n_buffers(mr) == 0, mr.stats()
    print("ok")


if __name__ == "__main__":
    main()
