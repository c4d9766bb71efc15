"""memres as PyTorch's CUDA allocator, in one line: memres.torch.use()."""
from . import _allocator

DEFAULT_SPEC = _allocator.DEFAULT_SPEC

_installed = None  # the allocator use() installed
_pool_allocator = None  # the allocator behind mem_pool()'s pools
_pluggables = []  # every CUDAPluggableAllocator a pool was made with (never released)


def use(spec=None):
    """use(spec=None) -> allocator

    Installs memres as torch's CUDA allocator (torch.cuda.memory.CUDAPluggableAllocator over
    libmemres-allocator): each device's memory comes from Resource(spec) with {device} replaced
    by its ordinal. spec None keeps the MEMRES_ALLOCATOR_RESOURCE set in the environment (the
    shell's setting wins over the script's default), else uses "cache>dmr:device={device}"; a
    spec given replaces MEMRES_ALLOCATOR_RESOURCE for this process. MEMRES_ALLOCATOR_RESOURCE_<N>
    still wins for device N. Returns an object whose stats(device), counters(device),
    resource(device) and count_buffers(device) tell what each device's resource holds.

    Call it before torch allocates on a device: torch cannot swap an allocator it has used,
    and memres raises memres.Error then rather than leave two allocators (and puts back the
    MEMRES_ALLOCATOR_RESOURCE it found, so that the refused spec reaches nothing). Raises memres.Error
    when libmemres-allocator was built without C++ (its alloc returns NULL, which torch does
    not check). An empty spec raises memres.InvalidArgumentError (a ValueError); without torch
    installed, ModuleNotFoundError."""
    global _installed
    spec = _allocator.resolve_spec(spec)
    torch = _allocator.import_framework("torch", "torch.use")

    alloc = _allocator.Allocator(spec)
    if not alloc.lib.memres_torch_alloc_throws():
        alloc.restore_environment()
        raise _allocator.error("libmemres-allocator was built without a C++ compiler: its "
                               "memres_torch_alloc returns NULL on failure, which torch does "
                               "not check; rebuild memres with g++", 0)
    pluggable = torch.cuda.memory.CUDAPluggableAllocator(alloc.path, "memres_torch_alloc",
                                                         "memres_torch_free")
    try:
        torch.cuda.memory.change_current_allocator(pluggable)
    except RuntimeError as err:
        alloc.restore_environment()
        if _installed is not None:
            raise _allocator.error("memres is torch's allocator already (spec %s): torch cannot "
                                   "swap an allocator it initialized, so use() works once per "
                                   "process; use the allocator the first use() returned (%s)"
                                   % (_installed.spec, err), 0) from err
        raise _allocator.error("torch has already allocated (or initialized CUDA) with its "
                               "own allocator, which it cannot swap: call memres.torch.use() "
                               "before the first CUDA tensor and before any torch.cuda call "
                               "that initializes CUDA (%s)" % err, 0) from err
    alloc.pluggable = pluggable
    _installed = alloc
    return alloc


def mem_pool(spec=None):
    """mem_pool(spec=None) -> torch.cuda.MemPool

    A torch.cuda.MemPool (PyTorch 2.5 and later) whose memory comes from memres: inside
    torch.cuda.use_mem_pool(pool), torch's caching allocator takes each new segment of the
    pool from libmemres-allocator's memres_torch_pool_alloc and gives it back with
    memres_torch_free (when the pool's cached blocks are released: torch.cuda.empty_cache()
    with the pool's tensors gone, or the pool deleted). A failed allocation is a NULL there,
    which torch checks: it releases the pool's cached blocks, asks again, and raises
    torch.OutOfMemoryError. Unlike use(), it may be called after CUDA was initialized, and
    tensors outside use_mem_pool() keep torch's allocator. spec as use()'s; the resources are
    made once per process and device, so a spec other than the one this process's earlier
    use() or mem_pool() gave raises memres.Error. The pool's allocator object (stats(device),
    count_buffers(device)) is memres.torch.pool_allocator() afterwards. Raises memres.Error for
    a torch without torch.cuda.MemPool, ModuleNotFoundError without torch installed."""
    spec = _allocator.resolve_spec(spec)
    torch = _allocator.import_framework("torch", "torch.mem_pool")

    if getattr(torch.cuda, "MemPool", None) is None:
        raise _allocator.error("torch.cuda.MemPool is not in this torch (PyTorch 2.5 and later "
                               "have it): use memres.torch.use()", 0)
    global _pool_allocator
    for earlier in (_installed, _pool_allocator):
        if earlier is not None and earlier.spec != spec:
            raise _allocator.error("this process's memres allocator serves %s already (each "
                                   "device's resource is made once): mem_pool(%r) cannot "
                                   "change it" % (earlier.spec, spec), 0)
    alloc = _pool_allocator or _installed or _allocator.Allocator(spec)
    pluggable = torch.cuda.memory.CUDAPluggableAllocator(alloc.path, "memres_torch_pool_alloc",
                                                         "memres_torch_free")
    pool = torch.cuda.MemPool(pluggable.allocator())
    # the pool holds the C++ allocator by a plain pointer, and its tensors may outlive it (and
    # free through it): kept for the life of the process
    _pluggables.append(pluggable)
    _pool_allocator = alloc
    return pool


def pool_allocator():
    """pool_allocator() -> allocator or None

    The allocator object (stats(device), counters(device), resource(device),
    count_buffers(device), empty_cache()) behind the pools mem_pool() made in this process,
    None before the first."""
    return _pool_allocator


def snapshot(device=None):
    """snapshot(device=None) -> dict

    The snapshot (memres.Resource.snapshot(), docs/snapshot.md) of the resource that serves
    torch's allocations on device (None: torch.cuda.current_device()) since memres.torch.use().
    Raises memres.Error when use() was not called in this process."""
    if _installed is None:
        raise _allocator.error("memres is not torch's allocator: call memres.torch.use() first",
                               0)
    if device is None:
        import torch

        device = torch.cuda.current_device()
    return _installed.snapshot(device)
