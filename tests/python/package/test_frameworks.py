"""memres.torch.use and memres.cupy.use: on a device with torch or CuPy (the H200), each in a
fresh interpreter (an allocator is installed once per process); skipped where either is absent.
The allocator object itself is checked everywhere."""
import importlib.util
import os
import subprocess
import sys

import pytest

import memres
from memres import _allocator
from conftest import MODE


def run(code):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_allocator_object():
    alloc = _allocator.Allocator("cache>dmr:device={device}")
    assert os.path.isfile(alloc.path)
    if MODE == "host":  # no driver: no device resource
        assert alloc.resource(0) is None and alloc.stats(0) == {} and alloc.counters(0) == {}
    else:
        assert alloc.resource(0).kind == "cache"
        assert alloc.stats(0)["used_current"] == 0
        counters = alloc.counters(0)
        assert counters["hits"] == counters["misses"] == counters["used"] == 0
    assert alloc.count_buffers() == 0
    assert "cache>dmr" in repr(alloc)
    # a device is an int of a C int's range: 2**40 was device 0 (ctypes kept its low 32 bits),
    # None or "0" a ctypes.ArgumentError
    for call in (alloc.resource, alloc.stats, alloc.counters, alloc.snapshot, alloc.count_buffers):
        for bad in (1 << 40, 1 << 31, -(1 << 31) - 1):
            with pytest.raises(memres.OutOfRangeError):
                call(bad)
        for bad in (None, "0", 0.0):
            with pytest.raises(TypeError):
                call(bad)


def test_allocator_not_found(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMRES_ALLOCATOR_LIB", str(tmp_path / "none.so"))
    with pytest.raises(memres.Error) as info:
        _allocator.Allocator("host")
    assert info.value.code == memres.ErrorCode.NOT_FOUND


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_use_empty_spec(framework, monkeypatch):
    """use(spec="") is an argument, refused as Resource("") is (InvalidArgumentError, a
    ValueError), before torch or CuPy is imported and before the environment is touched: the
    shim reads an empty MEMRES_ALLOCATOR_RESOURCE as unset, which would silently mean the
    default."""
    import memres.cupy
    import memres.torch

    use = getattr(memres, framework).use
    monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    for spec in ("", "  ", "\t\n"):
        with pytest.raises(memres.InvalidArgumentError, match="is empty") as info:
            use(spec=spec)
        assert isinstance(info.value, ValueError)
        assert (info.value.domain, info.value.code) == ("memres-error-quark",
                                                        memres.ErrorCode.INVALID_ARGUMENT)
    with pytest.raises(TypeError, match="spec must be a str"):
        use(spec=12)
    assert "MEMRES_ALLOCATOR_RESOURCE" not in os.environ
    with pytest.raises(memres.InvalidArgumentError):
        _allocator.Allocator("")


def fake_frameworks(monkeypatch):
    """Stand-ins for torch and CuPy in sys.modules that record what use() installs (the real
    ones run on the GPU: test_torch, test_cupy)."""
    import types

    installed = []
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(memory=types.SimpleNamespace(
        CUDAPluggableAllocator=lambda path, alloc, free: ("pluggable", path, alloc, free),
        change_current_allocator=installed.append))
    cupy = types.ModuleType("cupy")
    memory = types.SimpleNamespace(
        CFunctionAllocator=lambda stream, malloc, free, owner: ("cfa", stream, malloc, free),
        OutOfMemoryError=MemoryError)
    cupy.cuda = types.SimpleNamespace(memory=memory, set_allocator=installed.append)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return installed


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_use_keeps_environment(framework, monkeypatch):
    """use() with no spec keeps the MEMRES_ALLOCATOR_RESOURCE the user set (it overwrote it with
    the default); without one it takes the default; a spec given replaces it for the process.
    An empty variable counts as unset, as the shim reads it."""
    import memres.cupy
    import memres.torch

    installed = fake_frameworks(monkeypatch)
    module = getattr(memres, framework)
    monkeypatch.setattr(memres.torch, "_installed", None)
    monkeypatch.setenv("MEMRES_ALLOCATOR_RESOURCE", "stats>cache>vmm:device={device}")
    alloc = module.use()
    assert alloc.spec == "stats>cache>vmm:device={device}"
    assert os.environ["MEMRES_ALLOCATOR_RESOURCE"] == "stats>cache>vmm:device={device}"
    assert len(installed) == 1
    for unset in (None, ""):
        if unset is None:
            monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE")
        else:
            monkeypatch.setenv("MEMRES_ALLOCATOR_RESOURCE", unset)
        alloc = module.use()
        assert alloc.spec == "cache>dmr:device={device}" == module.DEFAULT_SPEC
        assert os.environ["MEMRES_ALLOCATOR_RESOURCE"] == "cache>dmr:device={device}"
    monkeypatch.setenv("MEMRES_ALLOCATOR_RESOURCE", "cache>vmm:device={device}")
    alloc = module.use(spec="dmr:device={device}")
    assert alloc.spec == os.environ["MEMRES_ALLOCATOR_RESOURCE"] == "dmr:device={device}"
    assert len(installed) == 4


@pytest.mark.parametrize("previous", [None, "cache>vmm:device={device}"])
def test_torch_use_refused_restores_environment(previous, monkeypatch):
    """A use() that torch refuses (it allocated already: change_current_allocator raises
    RuntimeError) raises memres.Error and puts back the MEMRES_ALLOCATOR_RESOURCE it found
    (unset stays unset): the refused spec must not reach a later memres.cupy.use() with no spec,
    nor a child process."""
    import memres.cupy
    import memres.torch

    installed = fake_frameworks(monkeypatch)
    monkeypatch.setattr(memres.torch, "_installed", None)

    def refuse(allocator):
        raise RuntimeError("Can't swap an already initialized allocator")

    monkeypatch.setattr(sys.modules["torch"].cuda.memory, "change_current_allocator", refuse)
    if previous is None:
        monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    else:
        monkeypatch.setenv("MEMRES_ALLOCATOR_RESOURCE", previous)
    with pytest.raises(memres.Error, match="already allocated.*initialized allocator"):
        memres.torch.use(spec="limit:max=1GiB>dmr:device={device}")
    assert os.environ.get("MEMRES_ALLOCATOR_RESOURCE") == previous
    assert memres.torch._installed is None
    alloc = memres.cupy.use()
    assert alloc.spec == (previous or memres.cupy.DEFAULT_SPEC)
    assert len(installed) == 1


@pytest.mark.parametrize("call", ["torch.use", "torch.mem_pool", "cupy.use"])
def test_use_without_the_framework(call, monkeypatch):
    """Where torch or CuPy is not installed, use() and mem_pool() say which call needs which
    framework (they raised the bare "No module named 'torch'" of their own import, from inside
    memres/torch.py, a module named torch itself): a ModuleNotFoundError still (an ImportError,
    as Python programs catch a missing optional dependency), naming the module, and the
    environment untouched."""
    import memres.cupy
    import memres.torch

    framework, function = call.split(".")
    # absent: an import of it fails as for a module that is not installed
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    monkeypatch.setattr(memres.torch, "_installed", None)
    with pytest.raises(ModuleNotFoundError) as info:
        getattr(getattr(memres, framework), function)(spec="cache>dmr:device={device}")
    message = str(info.value)
    assert "memres.%s() needs %s" % (call, {"torch": "PyTorch", "cupy": "CuPy"}[framework]) \
        in message
    assert "not installed" in message and "import %s" % framework in message
    assert info.value.name == framework
    assert isinstance(info.value.__cause__, ImportError)
    assert "MEMRES_ALLOCATOR_RESOURCE" not in os.environ
    assert memres.torch._installed is None


def test_cupy_use_takes_any_stream(monkeypatch):
    """memres.cupy.use(stream=...) takes a stream as every memres call does (a CuPy stream's
    .ptr, __cuda_stream__, a torch stream, an int, None for the legacy default stream): it
    handed the object to CuPy's CFunctionAllocator, which takes an int only (a CuPy stream
    was a TypeError from CuPy). A bad stream is memres's TypeError, raised before the
    environment is touched."""
    import types

    import memres.cupy

    fake_frameworks(monkeypatch)
    made = []
    sys.modules["cupy"].cuda.memory.CFunctionAllocator = (
        lambda stream, malloc, free, owner: made.append(stream) or ("cfa", stream))
    monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)

    class CudaStream:
        def __cuda_stream__(self):
            return (0, 0x5678)

    for stream, handle in ((None, 0), (0, 0), (2, 2), (types.SimpleNamespace(ptr=0x1234), 0x1234),
                           (CudaStream(), 0x5678),
                           (types.SimpleNamespace(cuda_stream=0x9abc), 0x9abc)):
        memres.cupy.use(stream=stream)
        assert made[-1] == handle and type(made[-1]) is int
    for stream, error in (("s", TypeError), (1.5, TypeError), (-1, memres.OutOfRangeError)):
        monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
        with pytest.raises(error, match="stream"):
            memres.cupy.use(spec="dmr:device={device}", stream=stream)
        assert "MEMRES_ALLOCATOR_RESOURCE" not in os.environ
    assert len(made) == 6


@pytest.mark.parametrize("previous", [None, "cache>vmm:device={device}"])
def test_cupy_use_refused_restores_environment(previous, monkeypatch):
    """A cupy.use() that CuPy refuses (its CFunctionAllocator or set_allocator raises) puts
    back the MEMRES_ALLOCATOR_RESOURCE it found, as torch.use() does: the refused spec reached
    the next use() without a spec, and child processes."""
    import memres.cupy

    fake_frameworks(monkeypatch)

    def refuse(malloc):
        raise RuntimeError("CuPy refuses")

    monkeypatch.setattr(sys.modules["cupy"].cuda, "set_allocator", refuse)
    if previous is None:
        monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    else:
        monkeypatch.setenv("MEMRES_ALLOCATOR_RESOURCE", previous)
    with pytest.raises(RuntimeError, match="CuPy refuses"):
        memres.cupy.use(spec="limit:max=1GiB>dmr:device={device}")
    assert os.environ.get("MEMRES_ALLOCATOR_RESOURCE") == previous


class FakeCFunctionAllocator:
    """cupy.cuda.memory.CFunctionAllocator: records its arguments; malloc() returns a
    MemoryPointer-like object at the next address of ptrs (0: CuPy's NULL)."""

    def __init__(self, param, malloc, free, owner):
        self.args = (param, malloc, free, owner)
        self.ptrs = []

    def malloc(self, size):
        import types

        return types.SimpleNamespace(ptr=self.ptrs.pop(0), size=size)


def check_cupy_malloc(malloc, cupy, param, malloc_address, free_address, owner):
    """What memres.cupy.use() and memres_interop's Allocator.cupy_allocator() give CuPy: the
    CFunctionAllocator over the shim's two functions, and the NULL check CuPy does not make."""
    cfa = malloc.c_function_allocator
    assert isinstance(cfa, FakeCFunctionAllocator)
    assert cfa.args == (param, malloc_address, free_address, owner)
    assert malloc_address and free_address and malloc_address != free_address
    cfa.ptrs = [0x7000, 0, 0]
    assert malloc(256).ptr == 0x7000
    with pytest.raises(cupy.cuda.memory.OutOfMemoryError) as info:
        malloc(256)
    assert info.value.args == (256, -1)
    assert malloc(0).ptr == 0  # CuPy's empty arrays: NULL is fine
    assert cfa.ptrs == []


class FakeCupyOOM(MemoryError):
    pass


def test_cupy_use_checks_null(monkeypatch):
    """memres.cupy.use() installs the CuPy allocator of memres_interop (shipped in the package):
    a NULL for 1 byte or more is CuPy's OutOfMemoryError."""
    import memres.cupy

    installed = fake_frameworks(monkeypatch)
    memory = sys.modules["cupy"].cuda.memory
    memory.CFunctionAllocator, memory.OutOfMemoryError = FakeCFunctionAllocator, FakeCupyOOM
    monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    alloc = memres.cupy.use(stream=0x42)
    assert installed == [alloc.malloc]
    check_cupy_malloc(alloc.malloc, sys.modules["cupy"], 0x42, alloc.address("memres_cupy_malloc"),
                      alloc.address("memres_cupy_free"), alloc)
    assert memres.cupy.memres_interop.__file__ == os.path.join(
        os.path.dirname(memres.__file__), "memres_interop.py")


INTEROP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                           "interop")


def test_interop_cupy_allocator(monkeypatch):
    """memres_interop (the ctypes recipe, from its own directory as share/memres-2/python holds
    it) gives the same CuPy allocator through Allocator().cupy_allocator(cupy), without the
    package: importing it loads no memres module."""
    fake_frameworks(monkeypatch)
    cupy = sys.modules["cupy"]
    cupy.cuda.memory.CFunctionAllocator = FakeCFunctionAllocator
    cupy.cuda.memory.OutOfMemoryError = FakeCupyOOM
    spec = importlib.util.spec_from_file_location(
        "memres_interop_alone", os.path.join(INTEROP_DIR, "memres_interop.py"))
    interop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(interop)
    lib = interop.Allocator()
    for param in (0, 0x42):
        check_cupy_malloc(lib.cupy_allocator(cupy, param), cupy, param,
                          lib.fn_address("memres_cupy_malloc"),
                          lib.fn_address("memres_cupy_free"), lib)
    out = run("import sys; sys.path.insert(0, %r); import memres_interop; "
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'memres'))"
              % INTEROP_DIR)
    assert out.strip() == "[]"


def test_import_keeps_ctypes_pythonapi():
    """Importing memres.cupy (and so memres_interop) leaves ctypes.pythonapi's prototypes as
    the program set them: memres_interop declares its capsule calls on a handle of its own (it
    set PyCapsule_New's restype to py_object for every user of ctypes.pythonapi)."""
    out = run("import ctypes\n"
              "api = ctypes.pythonapi\n"
              "api.PyCapsule_New.restype = ctypes.c_void_p\n"
              "before = [(f.restype, f.argtypes) for f in (api.PyCapsule_New, api.PyCapsule_IsValid,"
              " api.PyCapsule_GetPointer, api.PyCapsule_SetName)]\n"
              "import memres.cupy\n"
              "assert memres.cupy.memres_interop.capsule_from_tensor\n"
              "after = [(f.restype, f.argtypes) for f in (api.PyCapsule_New, api.PyCapsule_IsValid,"
              " api.PyCapsule_GetPointer, api.PyCapsule_SetName)]\n"
              "print(before == after, after[0][0].__name__)\n")
    assert out.split() == ["True", "c_void_p"]


def test_interop_capsules():
    """memres_interop's capsule calls on their own prototypes: a tensor taken out of its capsule
    (renamed used_..., taken twice refused), and one nobody took deleted with its capsule."""
    import ctypes
    import gc

    from memres import memres_interop as interop

    deleted = []

    @interop.DELETER
    def deleter(tensor):
        deleted.append(ctypes.addressof(tensor.contents))

    tensors = [interop.DLManagedTensorVersioned() for _ in range(2)]
    for t in tensors:
        t.deleter = deleter
    taken = interop.capsule_from_tensor(ctypes.addressof(tensors[0]))
    assert "dltensor_versioned" in repr(taken)
    t = interop.tensor_from_capsule(taken)
    assert ctypes.addressof(t.contents) == ctypes.addressof(tensors[0])
    assert "used_dltensor_versioned" in repr(taken)
    with pytest.raises(ValueError, match="not an unused"):
        interop.tensor_from_capsule(taken)
    del taken
    dropped = interop.capsule_from_tensor(ctypes.addressof(tensors[1]))
    del dropped
    gc.collect()
    assert deleted == [ctypes.addressof(tensors[1])]


def test_use_keeps_the_frameworks_own_import_error(monkeypatch):
    """A torch that is installed but fails to import (a library of its own missing) keeps its
    own error: only a torch that is not there is reported as not installed."""
    import importlib.abc
    import memres.torch

    class Broken(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                raise ImportError("libcudart.so.12: cannot open shared object file")
            return None

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Broken()] + sys.meta_path)
    with pytest.raises(ImportError, match="^libcudart.so.12: cannot open") as info:
        memres.torch.use()
    assert not isinstance(info.value, ModuleNotFoundError)


def test_torch_use_twice(monkeypatch):
    """torch refuses a second change_current_allocator (its pluggable allocator says it is
    initialized): the second use() raises memres.Error saying memres is installed already,
    not that torch allocated with its own allocator."""
    import memres.torch

    installed = fake_frameworks(monkeypatch)
    monkeypatch.setattr(memres.torch, "_installed", None)

    def change(allocator):
        if installed:
            raise RuntimeError("Can't swap an already initialized allocator")
        installed.append(allocator)

    monkeypatch.setattr(sys.modules["torch"].cuda.memory, "change_current_allocator", change)
    monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    first = memres.torch.use()
    with pytest.raises(memres.Error, match="allocator already.*cache>dmr") as info:
        memres.torch.use()
    assert info.value.code == 0
    assert memres.torch._installed is first and len(installed) == 1


class FakePluggable:
    """torch.cuda.memory.CUDAPluggableAllocator as torch.cuda.MemPool takes it."""

    def __init__(self, path, alloc, free):
        self.args = (path, alloc, free)

    def allocator(self):
        return ("cpp-allocator",) + self.args


def test_torch_mem_pool(monkeypatch):
    """mem_pool() gives torch.cuda.MemPool the shim's memres_torch_pool_alloc and
    memres_torch_free (PyTorch 2.5+: torch's caching allocator checks that alloc's pointer, so it
    returns NULL on failure instead of throwing); the C function is there and returns NULL for
    what cannot be allocated, leaving nothing behind. A second pool shares the allocator; another
    spec is refused (the resources are made once per process), and so is a torch without
    MemPool."""
    import ctypes
    import memres.torch

    fake_frameworks(monkeypatch)
    torch = sys.modules["torch"]
    pools = []
    monkeypatch.setattr(torch.cuda.memory, "CUDAPluggableAllocator", FakePluggable,
                        raising=False)
    torch.cuda.MemPool = lambda allocator: pools.append(allocator) or ("pool", allocator)
    monkeypatch.setattr(memres.torch, "_installed", None)
    monkeypatch.setattr(memres.torch, "_pool_allocator", None)
    monkeypatch.setattr(memres.torch, "_pluggables", [])
    monkeypatch.delenv("MEMRES_ALLOCATOR_RESOURCE", raising=False)
    assert memres.torch.pool_allocator() is None
    pool = memres.torch.mem_pool()
    alloc = memres.torch.pool_allocator()
    assert pool == ("pool", pools[0])
    assert pools[0] == ("cpp-allocator", alloc.path, "memres_torch_pool_alloc",
                        "memres_torch_free")
    assert alloc.spec == memres.torch.DEFAULT_SPEC
    fn = alloc.lib.memres_torch_pool_alloc
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
    assert fn(0, 0, None) is None
    assert fn(1 << 60, 0, None) is None  # no memory has it (no driver: no resource)
    assert fn(4096, 64, None) is None  # a device not served
    assert alloc.count_buffers() == 0
    memres.torch.mem_pool(spec=memres.torch.DEFAULT_SPEC)
    assert memres.torch.pool_allocator() is alloc and len(pools) == 2
    assert len(memres.torch._pluggables) == 2
    with pytest.raises(memres.Error, match="serves cache>dmr.*cannot change it"):
        memres.torch.mem_pool(spec="stats>dmr:device={device}")
    assert len(pools) == 2
    del torch.cuda.MemPool
    with pytest.raises(memres.Error, match="PyTorch 2.5"):
        memres.torch.mem_pool()


TORCH = r"""
import memres, memres.torch, torch
alloc = memres.torch.use(spec="stats>cache>dmr:device={device}")
x = torch.arange(1 << 20, dtype=torch.int32, device="cuda")
assert int(x[12345]) == 12345
assert x.sum().item() == (1 << 20) * ((1 << 20) - 1) // 2
s = alloc.stats(0)
assert s["used_current"] >= 4 << 20, s
assert alloc.count_buffers(0) >= 1
snap = memres.torch.snapshot(0)
assert [l["kind"] for l in snap["layers"]] == ["stats", "cache", "dmr"], snap["spec"]
assert snap["summary"]["used"] >= 4 << 20 and snap["driver"]["total"] > 0, snap["summary"]
assert snap["layers"][2]["complete"] is False and snap["layers"][2]["unseen"]
buf = memres.default_resource(0).allocate(256)
buf.fill(7)
t = torch.from_dlpack(buf)
assert t.dtype == torch.uint8 and t.shape == (256,) and int(t.sum()) == 7 * 256
del t
buf.close()
del x
torch.cuda.synchronize()
print("ok", s)
"""

TORCH_LATE = r"""
import memres, memres.torch, torch
torch.zeros(16, device="cuda")
try:
    memres.torch.use()
except memres.Error as err:
    print("refused:", err)
else:
    raise SystemExit("use() after torch allocated was not refused")
"""


def test_torch(device):
    if MODE != "gpu":  # the framework runs on the real driver; memres's buffers must too
        pytest.skip("torch needs memres on the real driver, not the fake")
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    assert run(TORCH).startswith("ok")
    assert run(TORCH_LATE).startswith("refused:")


CUPY = r"""
import memres, memres.cupy, cupy
alloc = memres.cupy.use("stats>cache>dmr:device={device}")
a = cupy.arange(1 << 20, dtype=cupy.int64)
assert int(a.sum()) == (1 << 20) * ((1 << 20) - 1) // 2
assert alloc.stats(0)["used_current"] >= 8 << 20
buf = memres.default_resource(0).allocate(512)
buf.fill(3)
v = cupy.asarray(buf)  # the CUDA array interface
assert v.dtype == cupy.uint8 and int(v.sum()) == 3 * 512
w = cupy.from_dlpack(buf)
assert int(w.sum()) == 3 * 512
del v, w
buf.close()
try:
    cupy.empty(1 << 50, dtype=cupy.uint8)
except cupy.cuda.memory.OutOfMemoryError:
    pass
else:
    raise SystemExit("no OutOfMemoryError for 1 PiB")
print("ok")
"""


def test_cupy(device):
    if MODE != "gpu":  # the framework runs on the real driver; memres's buffers must too
        pytest.skip("CuPy needs memres on the real driver, not the fake")
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    assert run(CUPY).startswith("ok")


# The framework suites moved from the ctypes tests (tests/python/test_*.py before): each a
# script under frameworks/, in a fresh interpreter (an allocator is installed once per process;
# JAX and torch each take the device their way). Exit 77 is a skip.
FRAMEWORKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frameworks")


@pytest.mark.parametrize("script,module", [("torch_training.py", "torch"),
                                           ("cupy_arrays.py", "cupy"),
                                           ("dlpack_frameworks.py", None)])
def test_framework_script(device, script, module):
    if MODE != "gpu":  # the frameworks run on the real driver; memres's buffers must too
        pytest.skip("the frameworks need memres on the real driver, not the fake")
    names = [module] if module else ["torch", "cupy"]
    if not any(importlib.util.find_spec(n) is not None for n in names):
        pytest.skip("%s not installed" % " or ".join(names))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
               CUBLAS_WORKSPACE_CONFIG=":4096:8", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    result = subprocess.run([sys.executable, os.path.join(FRAMEWORKS, script)], env=env,
                            capture_output=True, text=True, timeout=600)
    print(result.stdout)
    if result.returncode == 77:
        pytest.skip(result.stdout.strip().splitlines()[-1] if result.stdout.strip() else script)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("ok")
