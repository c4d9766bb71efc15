"""memres as CuPy's allocator, in one line: memres.cupy.use()."""
# memres_interop (interop/memres_interop.py, the ctypes recipe) ships in the package: its CuPy
# allocator with the NULL check is the one both use
from . import _allocator, _memres, memres_interop

DEFAULT_SPEC = _allocator.DEFAULT_SPEC


def use(spec=None, stream=0):
    """use(spec=None, stream=0) -> allocator

    Installs memres as CuPy's allocator (cupy.cuda.set_allocator over libmemres-allocator's
    memres_cupy_malloc/free, a CFunctionAllocator): each device's memory comes from
    Resource(spec), {device} replaced by its ordinal (spec None: the MEMRES_ALLOCATOR_RESOURCE
    set in the environment, else "cache>dmr:device={device}"; a spec given replaces it for this
    process), ordered on stream (0 or None: the legacy default stream; else any stream memres
    takes: an int handle, a CuPy or torch stream, an object with __cuda_stream__; another
    object is a TypeError). A failed allocation raises
    cupy.cuda.memory.OutOfMemoryError (CuPy itself does not check a NULL). Returns an object
    whose stats(device), counters(device), resource(device) and count_buffers(device) tell
    what each device's resource holds. An empty spec raises memres.InvalidArgumentError (a
    ValueError); without CuPy installed, ModuleNotFoundError; CuPy's own error where it refuses
    the allocator (the MEMRES_ALLOCATOR_RESOURCE found put back)."""
    spec = _allocator.resolve_spec(spec)
    # CuPy takes an int: the handle of any stream memres takes, checked before anything changes
    stream = _memres._stream_handle(stream)
    cupy = _allocator.import_framework("cupy", "cupy.use")

    alloc = _allocator.Allocator(spec)
    try:
        malloc = memres_interop.checked_cupy_allocator(
            cupy, stream, alloc.address("memres_cupy_malloc"), alloc.address("memres_cupy_free"),
            alloc)
        cupy.cuda.set_allocator(malloc)
    except BaseException:
        # refused: the spec reaches no later use() nor a child process (as torch.use())
        alloc.restore_environment()
        raise
    alloc.malloc = malloc
    return alloc
