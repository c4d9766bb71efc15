"""memres from Python with ctypes only: no extension module.

The recipe of docs/interop.md as a module the tests and benchmarks share (copy it freely):

  lib = Memres()                                   # libmemres ($MEMRES_LIBMEMRES or the loader's path)
  mr = lib.resource_new("dmr:device=0")
  buf = lib.allocate(mr, 4096)
  arr = DLPackExport(lib, buf, "float32", (1024,))  # has __dlpack__ / __dlpack_device__
  t = torch.from_dlpack(arr)                       # same device pointer, no copy
  back = lib.buffer_from_dlpack(torch_tensor)      # a MemresBuffer over torch's memory

  alloc = Allocator()                              # libmemres-allocator ($MEMRES_ALLOCATOR_LIB)
  assert alloc.torch_alloc_throws()                # torch does not check a NULL: needs the C++ build
  torch.cuda.memory.change_current_allocator(
      torch.cuda.memory.CUDAPluggableAllocator(alloc.path, "memres_torch_alloc", "memres_torch_free"))
  cupy.cuda.set_allocator(alloc.cupy_allocator(cupy))  # raises OutOfMemoryError for a NULL

Environment: MEMRES_LIBMEMRES (path of libmemres.so), MEMRES_ALLOCATOR_LIB (path of
libmemres-allocator.so), MEMRES_PLUGIN_PATH (the plugins), as `meson devenv` or the test suite set them.
"""

import ctypes
import os
import sys

SKIP = 77  # Meson's exit code of a skipped test


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(SKIP)


vp = ctypes.c_void_p


class GError(ctypes.Structure):
    _fields_ = [("domain", ctypes.c_uint32), ("code", ctypes.c_int), ("message", ctypes.c_char_p)]


class MemresStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in
                ("reserved_current", "reserved_high", "used_current", "used_high", "n_buffers")]

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}


# DLPack 1.x (memres-dlpack.h, from the DLPack specification)
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", vp), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", vp),
                                     ("deleter", DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

# the unversioned tensor of DLPack 0.x, for consumers that ask for no version (JAX 0.11)
class DLManagedTensor(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", vp),
                            ("deleter", LEGACY_DELETER)]

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
DTYPES = {"uint8": (1, 8), "int32": (0, 32), "int64": (0, 64), "float32": (2, 32),
          "float64": (2, 64), "float16": (2, 16)}

CAPSULE_NAME = b"dltensor_versioned"
USED_CAPSULE_NAME = b"used_dltensor_versioned"
LEGACY_CAPSULE_NAME = b"dltensor"  # DLPack 0.x; the consumer renames it "used_dltensor"


def _python_api(name, restype, *argtypes):
    """CPython's function name with a prototype of this module's own (called with the GIL held,
    as ctypes.pythonapi's are): setting restype/argtypes on ctypes.pythonapi's functions would
    change them for every other user of ctypes.pythonapi in the process (the package imports
    this module)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


class _api:
    PyCapsule_New = _python_api("PyCapsule_New", ctypes.py_object, vp, ctypes.c_char_p, vp)
    PyCapsule_IsValid = _python_api("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object,
                                    ctypes.c_char_p)
    PyCapsule_GetPointer = _python_api("PyCapsule_GetPointer", vp, ctypes.py_object,
                                       ctypes.c_char_p)
    PyCapsule_SetName = _python_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object,
                                    ctypes.c_char_p)


# The capsules' destructors: a tensor nobody consumed (the name is still "dltensor_versioned",
# or "dltensor" for the unversioned one) is deleted; a consumer renames the capsule
# ("used_dltensor_versioned", "used_dltensor") and owns the tensor. A destructor gets the dying
# capsule as a raw pointer: no Python reference may be made to it there, so the capsule calls
# below take the address (PYFUNCTYPE: called with the GIL held).
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, vp)
_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, vp, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_get_pointer_raw = ctypes.PYFUNCTYPE(vp, vp, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _delete_unconsumed(capsule_ptr, name, tensor_type):
    if _is_valid_raw(capsule_ptr, name):
        t = ctypes.cast(_get_pointer_raw(capsule_ptr, name), ctypes.POINTER(tensor_type))
        if t.contents.deleter:
            t.contents.deleter(t)


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule_ptr):
    _delete_unconsumed(capsule_ptr, CAPSULE_NAME, DLManagedTensorVersioned)


@CAPSULE_DESTRUCTOR
def _legacy_capsule_destructor(capsule_ptr):
    _delete_unconsumed(capsule_ptr, LEGACY_CAPSULE_NAME, DLManagedTensor)


def capsule_from_tensor(tensor_ptr):
    """A "dltensor_versioned" capsule over a DLManagedTensorVersioned pointer (an int)."""
    return _api.PyCapsule_New(tensor_ptr, CAPSULE_NAME,
                              ctypes.cast(_capsule_destructor, vp).value)


def legacy_capsule_from_tensor(tensor_ptr):
    """A "dltensor" capsule over an unversioned DLManagedTensor pointer (an int)."""
    return _api.PyCapsule_New(tensor_ptr, LEGACY_CAPSULE_NAME,
                              ctypes.cast(_legacy_capsule_destructor, vp).value)


def tensor_from_capsule(capsule):
    """Takes the tensor out of a "dltensor_versioned" capsule (renamed "used_...": the caller owns
    the tensor and must call its deleter)."""
    if not _api.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        raise ValueError("not an unused dltensor_versioned capsule")
    ptr = _api.PyCapsule_GetPointer(capsule, CAPSULE_NAME)
    _api.PyCapsule_SetName(capsule, USED_CAPSULE_NAME)
    return ctypes.cast(ptr, ctypes.POINTER(DLManagedTensorVersioned))


def legacy_tensor_from_capsule(capsule):
    """Takes the tensor out of an unversioned "dltensor" capsule (renamed "used_dltensor": the
    caller owns the tensor and must call its deleter)."""
    if not _api.PyCapsule_IsValid(capsule, LEGACY_CAPSULE_NAME):
        raise ValueError("not an unused dltensor capsule")
    ptr = _api.PyCapsule_GetPointer(capsule, LEGACY_CAPSULE_NAME)
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    return ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor))


# Unversioned tensors adopted as versioned ones (memres_buffer_new_for_dlpack() takes DLPack 1.x
# only): the address of each versioned wrapper -> (the wrapper, the unversioned tensor). One
# module-level deleter, so that no callback is freed while it runs.
_adopted = {}


@DELETER
def _adopted_deleter(self_ptr):
    wrapper, legacy = _adopted.pop(ctypes.cast(self_ptr, vp).value)
    if legacy.contents.deleter:
        legacy.contents.deleter(legacy)


def versioned_from_legacy(legacy):
    """A DLManagedTensorVersioned (version 1.0, flags 0: a 0.x tensor is writable and not a copy)
    over an unversioned DLManagedTensor pointer, sharing its shape and strides; its deleter runs
    the unversioned tensor's, once."""
    wrapper = DLManagedTensorVersioned()
    wrapper.version = DLPackVersion(1, 0)
    wrapper.dl_tensor = legacy.contents.dl_tensor
    wrapper.flags = 0
    wrapper.deleter = _adopted_deleter
    _adopted[ctypes.addressof(wrapper)] = (wrapper, legacy)
    return ctypes.pointer(wrapper)


def _producer_capsule(obj):
    """The capsule of obj.__dlpack__: asked for DLPack 1.x (max_version=(1, 0)); a producer that
    predates the keyword (DLPack 0.x, before the 2023.12 array API) is asked again without it.
    TypeError, naming the type, for an object that is no producer."""
    name = type(obj).__name__
    dlpack = getattr(obj, "__dlpack__", None)
    if not callable(dlpack):
        raise TypeError(f"{name} is not a DLPack producer: it has no __dlpack__ method")
    try:
        return dlpack(max_version=(1, 0))
    except TypeError as first:
        try:
            return dlpack()  # the legacy call
        except TypeError as second:
            raise TypeError(f"{name}.__dlpack__ takes neither max_version=(1, 0) ({first}) nor "
                            f"no argument ({second})") from second


def _find(env, default_names):
    path = os.environ.get(env)
    if path:
        return path
    for name in default_names:
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            pass
    skip(f"{env} is not set and {default_names[0]} cannot be loaded")


class MemresError(RuntimeError):
    def __init__(self, err):
        self.domain, self.code = err.contents.domain, err.contents.code
        super().__init__(err.contents.message.decode(errors="replace"))


class Memres:
    """libmemres through ctypes: the calls the tests and benchmarks use."""

    def __init__(self, path=None):
        self.path = path or _find("MEMRES_LIBMEMRES", ["libmemres.so.2", "libmemres.so"])
        lib = self.lib = ctypes.CDLL(self.path)
        err_p = ctypes.POINTER(ctypes.POINTER(GError))
        sigs = {
            "memres_resource_new": (vp, [ctypes.c_char_p, err_p]),
            "memres_resource_unref": (None, [vp]),
            "memres_resource_get_stats": (ctypes.c_int, [vp, ctypes.POINTER(MemresStats), err_p]),
            "memres_resource_allocate": (vp, [vp, ctypes.c_size_t, vp, err_p]),
            "memres_buffer_close": (ctypes.c_int, [vp, vp, err_p]),
            "memres_buffer_unref": (None, [vp]),
            "memres_buffer_get_address": (ctypes.c_uint64, [vp]),
            "memres_buffer_get_size": (ctypes.c_size_t, [vp]),
            "memres_buffer_get_device": (ctypes.c_int, [vp]),
            "memres_buffer_write": (ctypes.c_int,
                                    [vp, ctypes.c_size_t, vp, ctypes.c_size_t, vp, err_p]),
            "memres_buffer_read": (ctypes.c_int,
                                   [vp, ctypes.c_size_t, vp, ctypes.c_size_t, vp, err_p]),
            "memres_stream_synchronize": (ctypes.c_int, [vp, err_p]),
            "memres_buffer_export_dlpack": (ctypes.POINTER(DLManagedTensorVersioned),
                                            [vp, DLDataType, ctypes.c_int,
                                             ctypes.POINTER(ctypes.c_int64),
                                             ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64,
                                             err_p]),
            "memres_buffer_export_dlpack_unversioned": (ctypes.POINTER(DLManagedTensor),
                                                        [vp, DLDataType, ctypes.c_int,
                                                         ctypes.POINTER(ctypes.c_int64),
                                                         ctypes.POINTER(ctypes.c_int64),
                                                         ctypes.c_uint64, err_p]),
            "memres_buffer_new_for_dlpack": (vp, [ctypes.POINTER(DLManagedTensorVersioned),
                                                  err_p]),
            "memres_error_quark": (ctypes.c_uint32, []),
            "g_error_free": (None, [ctypes.POINTER(GError)]),
        }
        for name, (res, args) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        self.MEMRES_ERROR = lib.memres_error_quark()

    def _call(self, fn, *args):
        err = ctypes.POINTER(GError)()
        r = fn(*args, ctypes.byref(err))
        if err:
            e = MemresError(err)
            self.lib.g_error_free(err)
            raise e
        return r

    def resource_new(self, spec):
        return self._call(self.lib.memres_resource_new, spec.encode())

    def stats(self, mr):
        s = MemresStats()
        self._call(self.lib.memres_resource_get_stats, mr, ctypes.byref(s))
        return s.as_dict()

    def allocate(self, mr, size, stream=None):
        return self._call(self.lib.memres_resource_allocate, mr, size, stream)

    def close(self, buf, stream=None):
        self._call(self.lib.memres_buffer_close, buf, stream)

    def write(self, buf, data, offset=0):
        self._call(self.lib.memres_buffer_write, buf, offset, data, len(data), None)
        self._call(self.lib.memres_stream_synchronize, None)

    def read(self, buf, n, offset=0):
        out = ctypes.create_string_buffer(n)
        self._call(self.lib.memres_buffer_read, buf, offset, out, n, None)
        self._call(self.lib.memres_stream_synchronize, None)
        return out.raw

    def address(self, buf):
        return self.lib.memres_buffer_get_address(buf)

    def size(self, buf):
        return self.lib.memres_buffer_get_size(buf)

    def export_dlpack(self, buf, dtype, shape, strides=None, byte_offset=0, versioned=True):
        """memres_buffer_export_dlpack() (a DLManagedTensorVersioned pointer), or with
        versioned=False memres_buffer_export_dlpack_unversioned() (a DLManagedTensor one)."""
        code, bits = DTYPES[dtype]
        n = len(shape)
        shape_a = (ctypes.c_int64 * max(n, 1))(*shape)
        strides_a = (ctypes.c_int64 * n)(*strides) if strides is not None else None
        fn = (self.lib.memres_buffer_export_dlpack if versioned
              else self.lib.memres_buffer_export_dlpack_unversioned)
        return self._call(fn, buf, DLDataType(code, bits, 1), n, shape_a, strides_a, byte_offset)

    def buffer_from_dlpack(self, obj):
        """A MemresBuffer over another library's array (its __dlpack__ with max_version 1.0, or
        without it for a producer older than the keyword, whose unversioned tensor is adopted);
        the buffer calls the tensor's deleter when it closes. TypeError for an object that is no
        DLPack producer or whose __dlpack__ returns no DLPack capsule."""
        capsule = _producer_capsule(obj)
        if _api.PyCapsule_IsValid(capsule, CAPSULE_NAME):
            t = tensor_from_capsule(capsule)
        elif _api.PyCapsule_IsValid(capsule, LEGACY_CAPSULE_NAME):
            t = versioned_from_legacy(legacy_tensor_from_capsule(capsule))
        else:
            raise TypeError(f"{type(obj).__name__}.__dlpack__ returned {type(capsule).__name__}, "
                            "not an unused dltensor_versioned or dltensor capsule")
        try:
            return self._call(self.lib.memres_buffer_new_for_dlpack, t)
        except MemresError:
            t.contents.deleter(t)  # not taken: ours to delete
            raise


class DLPackExport:
    """A memres buffer seen by array libraries: torch.from_dlpack(x), cupy.from_dlpack(x),
    jax.dlpack.from_dlpack(x) call __dlpack__ and get a "dltensor_versioned" capsule when they
    pass max_version >= (1, 0), an unversioned "dltensor" one when they pass none (JAX 0.11)."""

    def __init__(self, memres, buf, dtype, shape, strides=None, byte_offset=0, on_delete=None):
        self.memres, self.buf = memres, buf
        self.dtype, self.shape, self.strides, self.byte_offset = dtype, shape, strides, byte_offset
        self.on_delete = on_delete  # called once per exported tensor, when its deleter runs
        self.exported_versions = []  # "1.x" or "0.x", one per __dlpack__ call
        self._deleters = []  # keeps the counting callbacks alive
        probe = memres.export_dlpack(buf, dtype, shape, strides, byte_offset)
        self.device = (probe.contents.dl_tensor.device.device_type,
                       probe.contents.dl_tensor.device.device_id)
        probe.contents.deleter(probe)

    def __dlpack_device__(self):
        return self.device

    def _count_deletes(self, t, deleter_type):
        # a copy of the pointer: the field itself is about to change
        original = deleter_type(ctypes.cast(t.contents.deleter, vp).value)
        cb = self.on_delete

        @deleter_type
        def counting(self_ptr):
            cb()
            original(self_ptr)

        self._deleters.append((counting, original))
        t.contents.deleter = counting

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("memres exports without a copy")
        # stream: the consumer's stream; memres's work is synchronized before export here
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        t = self.memres.export_dlpack(self.buf, self.dtype, self.shape, self.strides,
                                      self.byte_offset, versioned=versioned)
        self.exported_versions.append("1.x" if versioned else "0.x")
        if self.on_delete is not None:
            self._count_deletes(t, DELETER if versioned else LEGACY_DELETER)
        ptr = ctypes.cast(t, vp).value
        return capsule_from_tensor(ptr) if versioned else legacy_capsule_from_tensor(ptr)


class Allocator:
    """libmemres-allocator: its path (for torch's CUDAPluggableAllocator) and its functions."""

    def __init__(self, path=None):
        self.path = path or _find("MEMRES_ALLOCATOR_LIB", ["libmemres-allocator.so"])
        lib = self.lib = ctypes.CDLL(self.path)
        lib.memres_allocator_get_resource.restype = vp
        lib.memres_allocator_get_resource.argtypes = [ctypes.c_int]
        lib.memres_allocator_count_buffers.restype = ctypes.c_uint64
        lib.memres_allocator_count_buffers.argtypes = [ctypes.c_int]
        lib.memres_torch_empty_cache.restype = None
        lib.memres_torch_alloc_throws.restype = ctypes.c_int
        lib.memres_torch_alloc_throws.argtypes = []

    def fn_address(self, name):
        return ctypes.cast(getattr(self.lib, name), vp).value

    def resource(self, device=0):
        return self.lib.memres_allocator_get_resource(device)

    def count_buffers(self, device=-1):
        return self.lib.memres_allocator_count_buffers(device)

    def empty_cache(self):
        self.lib.memres_torch_empty_cache()

    def torch_alloc_throws(self):
        """True when memres_torch_alloc throws on failure (the build with a C++ compiler): the
        only build to give torch, which does not check a NULL pointer."""
        return bool(self.lib.memres_torch_alloc_throws())

    def cupy_allocator(self, cupy, param=0):
        """memres as CuPy's allocator (checked_cupy_allocator() over this library's
        memres_cupy_malloc/free): pass it to cupy.cuda.set_allocator. param: 0 for the legacy
        default stream, or a CUstream (int)."""
        return checked_cupy_allocator(cupy, param, self.fn_address("memres_cupy_malloc"),
                                      self.fn_address("memres_cupy_free"), self)


def checked_cupy_allocator(cupy, param, malloc_address, free_address, owner):
    """CuPy's allocator over libmemres-allocator's memres_cupy_malloc and memres_cupy_free (the
    addresses of the two functions, as ints): a cupy.cuda.memory.CFunctionAllocator (param: 0
    for the legacy default stream, or a CUstream as an int; owner: kept alive by CuPy as long
    as its memory), wrapped in a check CuPy does not make (CuPy 14 makes an array at address 0
    from a NULL): an allocation of 1 byte or more that gets NULL raises
    cupy.cuda.memory.OutOfMemoryError; 0 bytes may be NULL. The function returned is what
    cupy.cuda.set_allocator takes; its c_function_allocator is the CFunctionAllocator. Shared
    with the package's memres.cupy.use(), which ships this module."""
    cfa = cupy.cuda.memory.CFunctionAllocator(param, malloc_address, free_address, owner)
    oom = cupy.cuda.memory.OutOfMemoryError

    def malloc(size):
        mp = cfa.malloc(size)
        if size > 0 and mp.ptr == 0:
            raise oom(size, -1)
        return mp

    malloc.c_function_allocator = cfa
    return malloc
