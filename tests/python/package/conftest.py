"""The package suite's fixtures. MEMRES_PY_TEST_MODE tells where it runs (meson test sets it):
  host  no CUDA driver at all (MEMRES_CUDA_DRIVER names nothing): host kinds only;
  fake  the fault-injecting fake driver (tests/fakecuda): device kinds too, and its live counts;
  gpu   the real driver: the same device tests, skipped (exit 77) without a device."""
import ctypes
import os

import pytest

import memres

MODE = os.environ.get("MEMRES_PY_TEST_MODE", "host")


class IndexInt:
    """A NumPy-style integer: an int through __index__ alone (the tests' stand-in for
    numpy.int64 and the like)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def _device_resource_or_none():
    try:
        return memres.Resource("dmr:device=0")
    except memres.Error:
        return None


def pytest_configure(config):
    if MODE == "gpu" and _device_resource_or_none() is None:
        pytest.exit("no CUDA device: the gpu mode skips", returncode=77)


@pytest.fixture
def host():
    return memres.Resource("host")


@pytest.fixture
def device():
    """A device pool (dmr on device 0); skips without a driver."""
    if MODE == "host":
        pytest.skip("no CUDA driver in this mode")
    mr = _device_resource_or_none()
    if mr is None:
        pytest.skip("no CUDA device")
    return mr


class FakeCudaCounts(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in (
        "pools", "pool_allocations", "allocations", "reservations", "mappings",
        "physical_handles", "exported_fds", "streams", "events", "graphs", "graph_execs", "graph_allocations")]


@pytest.fixture
def fake_counts():
    """A function returning the fake driver's live counts as a dict; skips off the fake."""
    if MODE != "fake":
        pytest.skip("the live counts are the fake driver's")
    lib = ctypes.CDLL(os.environ["MEMRES_CUDA_DRIVER"])
    lib.fakecuda_get_counts.argtypes = [ctypes.POINTER(FakeCudaCounts)]

    def counts():
        c = FakeCudaCounts()
        lib.fakecuda_get_counts(ctypes.byref(c))
        return {name: getattr(c, name) for name, _ in FakeCudaCounts._fields_}

    return counts


@pytest.fixture
def fake_fail_call():
    """fail_call(entry, nth, code): the fake driver's fakecuda_fail_call (the nth call of the
    entry point from now returns the CUresult code, once); every fault disarmed afterwards.
    Skips off the fake."""
    if MODE != "fake":
        pytest.skip("fault injection is the fake driver's")
    lib = ctypes.CDLL(os.environ["MEMRES_CUDA_DRIVER"])
    lib.fakecuda_fail_call.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    yield lambda entry, nth, code: lib.fakecuda_fail_call(entry.encode(), nth, code)
    lib.fakecuda_reset_faults()
