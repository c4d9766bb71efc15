"""memres as PyTorch's CUDA allocator, in one line: memres.torch.use()."""
from . import _allocator

DEFAULT_SPEC = _allocator.DEFAULT_SPEC

_installed = None  # the allocator use() installed


def use(spec=None):
    """use(spec=None) -> allocator

    Installs memres as torch's CUDA allocator (torch.cuda.memory.CUDAPluggableAllocator over
    libmemres-allocator): each device's memory comes from Resource(spec) with {device} replaced
    by its ordinal. spec None keeps the MEMRES_ALLOCATOR_RESOURCE set in the environment (the
    shell's setting wins over the script's default), else uses "cache>dmr:device={device}"; a
    spec given replaces MEMRES_ALLOCATOR_RESOURCE for this process. MEMRES_ALLOCATOR_RESOURCE_<N>
    still wins for device N. Returns an object whose stats(device), resource(device) and
    count_buffers(device) tell what each device's resource holds.

    Call it before torch allocates on a device: torch cannot swap an allocator it has used,
    and memres raises memres.Error then rather than leave two allocators (and puts back the
    MEMRES_ALLOCATOR_RESOURCE it found, so that the refused spec reaches nothing). Raises memres.Error
    when libmemres-allocator was built without C++ (its alloc returns NULL, which torch does
    not check). An empty spec raises memres.InvalidArgumentError (a ValueError)."""
    spec = _allocator.resolve_spec(spec)
    import torch

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
        raise _allocator.error("torch has already allocated with its own allocator, which it "
                               "cannot swap: call memres.torch.use() before the first CUDA "
                               "tensor (%s)" % err, 0) from err
    alloc.pluggable = pluggable
    global _installed
    _installed = alloc
    return alloc


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
