"""DLPack between memres and the array libraries, through ctypes capsules only
(memres_interop.py; docs/interop.md):
- a memres device buffer read by torch.from_dlpack, cupy.from_dlpack and jax.dlpack.from_dlpack
  (when JAX sees the GPU; JAX 0.11 asks for no DLPack version and gets the unversioned
  "dltensor" capsule) without a copy: the same device pointer, the bytes memres wrote, and a
  write through torch seen by memres; the deleter of each exported tensor runs exactly once and
  the buffer is freed when the last consumer lets go;
- a torch (and CuPy) array wrapped into a memres buffer: the same pointer, its bytes read back
  through memres, and the producer's deleter run exactly once, when the buffer closes;
- capsules nobody consumes, versioned and unversioned: the deleter runs once when they die.

Exit 77 (skipped) without torch and CuPy, or without a CUDA device."""

import array
import ctypes
import gc
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "interop"))
import memres_interop as mi  # noqa: E402

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: no 75% grab

try:
    import torch
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None

N = 4096


def gpu_available():
    if torch is not None and torch.cuda.is_available():
        return True
    if cupy is not None:
        try:
            return cupy.cuda.runtime.getDeviceCount() > 0
        except cupy.cuda.runtime.CUDARuntimeError:
            return False
    return False


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


def wait_for(cond, seconds=5.0):
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        if cond() or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def expected_floats(offset=0.0):
    return array.array("f", (float(i) + offset for i in range(N))).tobytes()


def export_case(memres, mr, consumer, name):
    """A memres buffer of N float32 [0, 1, 2...] read by @consumer, which returns
    (pointer, object, read): the consumer's object holds the only reference left once ours is
    dropped; its bytes are read after that; dropping it runs the deleter once and frees the
    buffer."""
    buf = memres.allocate(mr, N * 4)
    memres.write(buf, expected_floats())
    deleted = Counter()
    exported = mi.DLPackExport(memres, buf, "float32", (N,), on_delete=deleted)
    assert exported.__dlpack_device__() == (mi.kDLCUDA, 0), exported.__dlpack_device__()
    address = memres.address(buf)
    n_before = memres.stats(mr)["n_buffers"]
    ptr, obj, read = consumer(exported)
    memres.lib.memres_buffer_unref(buf)  # the consumer's tensor keeps the buffer alive now
    assert memres.stats(mr)["n_buffers"] == n_before, "the buffer went with our reference"
    assert ptr == address, f"{name}: {ptr:#x} != {address:#x} (a copy)"
    assert read(obj) == expected_floats(), f"{name}: the bytes differ"
    assert deleted.n == 0
    del obj
    wait_for(lambda: deleted.n > 0)  # JAX may release its buffers a little later
    assert deleted.n == 1, f"{name}: the deleter ran {deleted.n} times"
    versions = ", ".join(exported.exported_versions)
    del exported
    gc.collect()
    assert deleted.n == 1, f"{name}: the deleter ran {deleted.n} times"
    assert memres.stats(mr)["n_buffers"] == n_before - 1, memres.stats(mr)
    print(f"{name}: read a memres buffer at {ptr:#x} without a copy (DLPack {versions}); "
          "deleter once; freed")


def torch_bytes(t):
    host = t.contiguous().cpu()
    return ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())


def torch_consumer(exported):
    t = torch.from_dlpack(exported)
    assert t.is_cuda and t.dtype == torch.float32 and t.shape == (N,)
    return t.data_ptr(), t, torch_bytes


def cupy_consumer(exported):
    a = cupy.from_dlpack(exported)
    assert a.dtype == cupy.float32 and a.shape == (N,)
    return a.data.ptr, a, lambda x: cupy.asnumpy(x).tobytes()


def jax_consumer(exported):
    """JAX 0.11 calls __dlpack__(stream=...) without max_version: it gets the unversioned
    "dltensor" capsule; the array must be over memres's memory (same device pointer)."""
    import jax
    import numpy
    a = jax.dlpack.from_dlpack(exported)
    assert exported.exported_versions, "JAX did not call __dlpack__"
    if hasattr(a, "unsafe_buffer_pointer"):
        ptr = a.unsafe_buffer_pointer()
    else:
        ptr = a.__cuda_array_interface__["data"][0]
    return ptr, a, lambda x: numpy.asarray(x).tobytes()


def unconsumed_case(memres, mr):
    """Capsules nobody consumes: each kind ("dltensor_versioned" for max_version >= (1, 0),
    "dltensor" for none or below) deletes its tensor once when it dies, and the buffer goes."""
    for kwargs, name, version in (({"max_version": (1, 0)}, mi.CAPSULE_NAME, "1.x"),
                                  ({"max_version": (1, 3)}, mi.CAPSULE_NAME, "1.x"),
                                  ({}, mi.LEGACY_CAPSULE_NAME, "0.x"),
                                  ({"max_version": (0, 8)}, mi.LEGACY_CAPSULE_NAME, "0.x")):
        n_before = memres.stats(mr)["n_buffers"]
        buf = memres.allocate(mr, N * 4)
        deleted = Counter()
        exported = mi.DLPackExport(memres, buf, "float32", (N,), on_delete=deleted)
        capsule = exported.__dlpack__(**kwargs)
        memres.lib.memres_buffer_unref(buf)  # the capsule's tensor keeps the buffer now
        assert mi._api.PyCapsule_IsValid(capsule, name), f"{kwargs}: not a {name} capsule"
        assert exported.exported_versions == [version], exported.exported_versions
        assert memres.stats(mr)["n_buffers"] == n_before + 1
        del capsule
        assert deleted.n == 1, f"{kwargs}: the deleter ran {deleted.n} times"
        del exported
        gc.collect()
        assert deleted.n == 1
        assert memres.stats(mr)["n_buffers"] == n_before, memres.stats(mr)
    print("unconsumed capsules (versioned and unversioned): deleter once each; freed")


def write_through_torch(memres, mr):
    """A write by torch into the exported memory is what memres reads: one memory."""
    buf = memres.allocate(mr, N * 4)
    memres.write(buf, expected_floats())
    exported = mi.DLPackExport(memres, buf, "float32", (64, 64), strides=(1, 64))
    t = torch.from_dlpack(exported)
    ref = torch.arange(N, dtype=torch.float32).reshape(64, 64).t()
    torch.testing.assert_close(t.cpu(), ref)  # the strides went through
    t.add_(1.0)
    torch.cuda.synchronize()
    assert memres.read(buf, N * 4) == expected_floats(1.0)
    del t, exported
    gc.collect()
    memres.lib.memres_buffer_unref(buf)
    print("torch wrote into a memres buffer through strides (64, 64)/(1, 64); memres read it")


def wrap_case(memres, name, make, to_bytes, sync, allocated):
    """@make() builds an array; its DLPack tensor wrapped as a memres buffer reads back its bytes;
    the producer's deleter runs once, when the buffer closes, and then its memory is freed."""
    arr = make()
    expected = to_bytes(arr)
    capsule = arr.__dlpack__(max_version=(1, 0))
    tensor = mi.tensor_from_capsule(capsule)
    deleted = Counter()
    original = mi.DELETER(ctypes.cast(tensor.contents.deleter, ctypes.c_void_p).value)

    @mi.DELETER
    def counting(p):
        deleted()
        original(p)

    tensor.contents.deleter = counting
    ptr = arr.data_ptr() if hasattr(arr, "data_ptr") else arr.data.ptr
    del arr
    gc.collect()
    held = allocated()
    buf = memres._call(memres.lib.memres_buffer_new_for_dlpack, tensor)
    assert memres.address(buf) == ptr, f"{name}: {memres.address(buf):#x} != {ptr:#x}"
    assert memres.size(buf) == len(expected)
    assert memres.lib.memres_buffer_get_device(buf) == 0
    assert memres.read(buf, len(expected)) == expected, f"{name}: the bytes differ"
    assert deleted.n == 0
    memres.close(buf)
    assert deleted.n == 1
    memres.lib.memres_buffer_unref(buf)
    del capsule, tensor
    gc.collect()
    sync()
    assert deleted.n == 1, f"{name}: the deleter ran {deleted.n} times"
    if held is not None:
        assert allocated() < held, f"{name}: the producer's memory was not released"
    print(f"{name}: its tensor wrapped as a memres buffer at {ptr:#x}, read back; deleter once")


def main():
    if torch is None and cupy is None:
        mi.skip("neither torch nor cupy is importable")
    if not gpu_available():
        mi.skip("no CUDA device")
    memres = mi.Memres()
    mr = memres.resource_new("dmr:device=0")
    unconsumed_case(memres, mr)

    if torch is not None:
        export_case(memres, mr, torch_consumer, "torch.from_dlpack")
        write_through_torch(memres, mr)
        wrap_case(memres, "torch",
                  lambda: torch.arange(1 << 20, dtype=torch.int32, device="cuda") * 3,
                  torch_bytes, torch.cuda.synchronize,
                  torch.cuda.memory_allocated)
    if cupy is not None:
        export_case(memres, mr, cupy_consumer, "cupy.from_dlpack")
        pool = cupy.get_default_memory_pool()
        wrap_case(memres, "cupy", lambda: cupy.arange(1 << 20, dtype=cupy.int32) * 3,
                  lambda a: cupy.asnumpy(a).tobytes(), cupy.cuda.Device(0).synchronize,
                  pool.used_bytes)
    try:
        import jax
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
    except Exception as e:  # not installed, or no GPU backend
        gpus = []
        print(f"jax: not run ({type(e).__name__}: {e})")
    if gpus:
        export_case(memres, mr, jax_consumer, "jax.dlpack.from_dlpack")
    elif "jax" in sys.modules:
        print("jax: not run (JAX sees no GPU)")

    gc.collect()
    assert memres.stats(mr)["n_buffers"] == 0, memres.stats(mr)
    memres.lib.memres_resource_unref(mr)
    print("ok")


if __name__ == "__main__":
    main()
