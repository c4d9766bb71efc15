"""libmemres-allocator, the shim memres.torch and memres.cupy install (memres-allocator.h):
found beside libmemres (a wheel's memres/, a prefix's libdir) or at MEMRES_ALLOCATOR_LIB."""
import ctypes
import os

from . import _memres


def error(message, code=_memres.ERROR_INVALID_ARGUMENT):
    """A memres.Error (its subclass for code) raised by the Python half of the package."""
    invalid = (_memres.ERROR_INVALID_ARGUMENT, _memres.ERROR_NOT_FOUND)
    cls = _memres.InvalidArgumentError if code in invalid else _memres.Error
    err = cls(message)
    err.message, err.domain, err.code = message, "memres-error-quark", code
    return err


DEFAULT_SPEC = "cache>dmr:device={device}"

_FRAMEWORKS = {"torch": "PyTorch", "cupy": "CuPy"}


def import_framework(name, call):
    """The framework module name ("torch", "cupy") that memres.<call>() installs memres into.
    One that is not installed raises ModuleNotFoundError (an ImportError) naming the call and
    the framework, chained to the import's own error; one that is installed but fails to import
    (a library of its own missing) raises its own error unchanged."""
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        raise ModuleNotFoundError(
            "memres.%s() needs %s, which is not installed here (import %s: %s); install it, or "
            "use memres.Resource and DLPack without it" % (call, _FRAMEWORKS[name], name, err),
            name=name) from err


def check_spec(spec):
    """The spec use() was given, checked before anything is loaded: None, or a str that is not
    empty or blank. The shim itself reads an empty MEMRES_ALLOCATOR_RESOURCE as unset (the
    default spec), as memres reads every empty MEMRES_* variable; an empty spec passed to use()
    is an argument, refused as Resource("") refuses it."""
    if spec is None:
        return spec
    if not isinstance(spec, str):
        raise TypeError("spec must be a str (a spec or @name) or None, not %s"
                        % type(spec).__name__)
    if not spec.strip():
        raise error("spec %r is empty: give a spec (the default is %s) or an @name"
                    % (spec, DEFAULT_SPEC))
    return spec


def resolve_spec(spec):
    """The spec the shim will use: spec when one is given (it replaces MEMRES_ALLOCATOR_RESOURCE
    for this process); None keeps the MEMRES_ALLOCATOR_RESOURCE the user set (not empty), else
    the default, cache>dmr:device={device}. MEMRES_ALLOCATOR_RESOURCE_<N> still wins for device
    N either way (the shim reads it first)."""
    check_spec(spec)
    if spec is not None:
        return spec
    return os.environ.get("MEMRES_ALLOCATOR_RESOURCE") or DEFAULT_SPEC


class Allocator:
    """The shim, loaded once, with the per-device statistics of the resources it made."""

    def __init__(self, spec=None):
        spec = resolve_spec(spec)
        self.path = os.environ.get("MEMRES_ALLOCATOR_LIB") or os.path.join(
            os.path.dirname(_memres.library_path()), "libmemres-allocator.so")
        if not os.path.isfile(self.path):
            raise error("libmemres-allocator not found at %s (set MEMRES_ALLOCATOR_LIB)"
                        % self.path, _memres.ERROR_NOT_FOUND)
        self.spec = spec
        # read by the shim when a device's resource is first made (unchanged when it is the
        # user's own setting already); restore_environment() puts the user's back
        self._previous = os.environ.get("MEMRES_ALLOCATOR_RESOURCE")
        if self._previous != spec:
            os.environ["MEMRES_ALLOCATOR_RESOURCE"] = spec
        lib = self.lib = ctypes.CDLL(self.path)
        lib.memres_allocator_get_resource.restype = ctypes.c_void_p
        lib.memres_allocator_get_resource.argtypes = [ctypes.c_int]
        lib.memres_allocator_count_buffers.restype = ctypes.c_uint64
        lib.memres_allocator_count_buffers.argtypes = [ctypes.c_int]
        lib.memres_torch_alloc_throws.restype = ctypes.c_int
        lib.memres_torch_empty_cache.restype = None
        lib.memres_torch_empty_cache.argtypes = []

    def restore_environment(self):
        """Puts back the MEMRES_ALLOCATOR_RESOURCE this object replaced (unset when it was
        unset): for a use() that failed, so that the spec it was given does not reach a later
        use() with no spec, nor a child process."""
        if self._previous is None:
            os.environ.pop("MEMRES_ALLOCATOR_RESOURCE", None)
        else:
            os.environ["MEMRES_ALLOCATOR_RESOURCE"] = self._previous

    def address(self, name):
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value

    def resource(self, device=0):
        """The Resource serving device (made by this call if no allocation made it yet), or None
        when it cannot be made (no driver, no such device). device is checked as
        default_resource() checks it: TypeError for one that is not an int,
        memres.OutOfRangeError past a C int's range (not wrapped to another device)."""
        ptr = self.lib.memres_allocator_get_resource(_memres._device_index(device))
        return _memres._resource_from_address(ptr) if ptr else None

    def stats(self, device=0):
        """The statistics of device's resource (Resource.stats()), {} when there is none."""
        mr = self.resource(device)
        return mr.stats() if mr is not None else {}

    def counters(self, device=0):
        """The kind's counters of device's resource (Resource.counters(): the cache's hits and
        misses, the arena's granules created and remapped...), {} when there is none."""
        mr = self.resource(device)
        return mr.counters() if mr is not None else {}

    def snapshot(self, device=0):
        """The snapshot of device's resource (Resource.snapshot()), None when there is none."""
        mr = self.resource(device)
        return mr.snapshot() if mr is not None else None

    def empty_cache(self):
        """Trims every device's resource to 0 bytes kept (memres_torch_empty_cache(): what
        torch.cuda.empty_cache() asks of it; the cache's free blocks, the pool's reserve)."""
        self.lib.memres_torch_empty_cache()

    def count_buffers(self, device=-1):
        """Live buffers of device (-1: of every device)."""
        return self.lib.memres_allocator_count_buffers(_memres._device_index(device))

    def __repr__(self):
        return "<memres allocator %s from %s>" % (self.spec, self.path)
