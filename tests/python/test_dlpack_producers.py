"""memres_interop.buffer_from_dlpack and the producers it meets, over host memory (no framework,
no device: the suite fake runs it in CI):
- a DLPack 1.x producer (__dlpack__ takes max_version): the buffer has the producer's pointer
  and bytes, and the producer's deleter runs once, when the buffer closes;
- a producer older than max_version (__dlpack__(stream=None) only, or no argument at all): asked
  again without the keyword, its unversioned tensor adopted; the same checks;
- an object without __dlpack__, a __dlpack__ that takes neither call, and one returning no
  capsule: a TypeError naming the type, nothing consumed.

Exit 77 (skipped) where libmemres cannot be loaded."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "interop"))
import memres_interop as mi  # noqa: E402

N = 256
PATTERN = bytes((i * 7 + 3) % 256 for i in range(N))


class Legacy:
    """A producer of DLPack 0.x: no max_version keyword, an unversioned capsule."""

    def __init__(self, exported):
        self.exported = exported

    def __dlpack__(self, stream=None):
        return self.exported.__dlpack__(stream=stream)


class LegacyNoArgs(Legacy):
    def __dlpack__(self):
        return self.exported.__dlpack__()


class NeedsArgument:
    def __dlpack__(self, required):
        raise AssertionError("never called with an argument")


class NotACapsule:
    def __dlpack__(self, stream=None, max_version=None):
        return 42


def check_round_trip(memres, mr, producer_type, version):
    src = memres.allocate(mr, N)
    memres.write(src, PATTERN)
    deleted = []
    exported = mi.DLPackExport(memres, src, "uint8", (N,), on_delete=lambda: deleted.append(1))
    producer = exported if producer_type is None else producer_type(exported)
    buf = memres.buffer_from_dlpack(producer)
    assert exported.exported_versions == [version], exported.exported_versions
    assert memres.address(buf) == memres.address(src)
    assert memres.size(buf) == N
    assert memres.read(buf, N) == PATTERN
    assert deleted == []  # the buffer holds the tensor
    memres.close(buf)
    assert deleted == [1], deleted  # the producer's deleter, once
    memres.lib.memres_buffer_unref(buf)
    memres.close(src)
    memres.lib.memres_buffer_unref(src)


def expect_type_error(memres, obj, *needles):
    try:
        memres.buffer_from_dlpack(obj)
    except TypeError as e:
        for needle in needles:
            assert needle in str(e), (needle, str(e))
        return
    raise AssertionError(f"{type(obj).__name__}: no TypeError")


def main():
    memres = mi.Memres()
    mr = memres.resource_new("host")
    check_round_trip(memres, mr, None, "1.x")
    check_round_trip(memres, mr, Legacy, "0.x")
    check_round_trip(memres, mr, LegacyNoArgs, "0.x")
    expect_type_error(memres, object(), "object is not a DLPack producer", "no __dlpack__")
    expect_type_error(memres, NeedsArgument(), "NeedsArgument.__dlpack__ takes neither",
                      "max_version")
    expect_type_error(memres, NotACapsule(), "NotACapsule.__dlpack__ returned int",
                      "not an unused dltensor_versioned or dltensor capsule")
    assert mi._adopted == {}  # every adopted tensor was deleted
    assert memres.stats(mr)["n_buffers"] == 0
    memres.lib.memres_resource_unref(mr)
    print("ok: buffer_from_dlpack with 1.x, 0.x and non-producers")


if __name__ == "__main__":
    main()
