"""memres.from_dlpack and the producers it meets, over host memory (moved from the ctypes
suite, tests/python/test_dlpack_producers.py):
- a DLPack 1.x producer (__dlpack__ takes max_version): the buffer has the producer's pointer
  and bytes, and the producer's deleter runs once, when the buffer closes;
- a producer older than max_version (__dlpack__(stream=None) only, or no argument at all): asked
  again without the keyword, its unversioned tensor adopted; the same checks;
- an object without __dlpack__, a __dlpack__ that takes none of those calls, one returning no
  capsule: a TypeError naming the type, nothing consumed."""
import pytest

import memres

N = 256
PATTERN = bytes((i * 7 + 3) % 256 for i in range(N))


class Versioned:
    """A DLPack 1.x producer over a memres buffer; counts the versions it exported."""

    def __init__(self, buf):
        self.buf, self.versions = buf, []

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self.versions.append("1.x" if max_version and max_version[0] >= 1 else "0.x")
        return self.buf.__dlpack__(stream=stream, max_version=max_version)


class Legacy(Versioned):
    def __dlpack__(self, stream=None):
        self.versions.append("0.x")
        return self.buf.__dlpack__(stream=stream)


class LegacyNoArgs(Versioned):
    def __dlpack__(self):
        self.versions.append("0.x")
        return self.buf.__dlpack__()


class NeedsArgument:
    def __dlpack__(self, required):
        raise AssertionError("never called with an argument")


class NotACapsule:
    def __dlpack__(self, stream=None, max_version=None):
        return 42


@pytest.mark.parametrize("producer_type,version", [(Versioned, "1.x"), (Legacy, "0.x"),
                                                   (LegacyNoArgs, "0.x")])
def test_round_trip(producer_type, version):
    mr = memres.Resource("stats>host")
    src = mr.allocate(N)
    src.write(PATTERN)
    producer = producer_type(src)
    buf = memres.from_dlpack(producer)
    assert producer.versions == [version]
    assert buf.handle == src.handle and buf.size == N and buf.read() == PATTERN
    # the tensor holds the source buffer: the producer's reference is not the last one
    assert mr.stats()["n_buffers"] == 1
    buf.close()  # the tensor's deleter, once
    src.close()
    assert mr.stats()["n_buffers"] == 0


@pytest.mark.parametrize("obj,needle", [(object(), "object object is not a DLPack producer"),
                                        (NeedsArgument(), "NeedsArgument.__dlpack__ takes neither"),
                                        (NotACapsule(), "NotACapsule.__dlpack__ returned int")])
def test_not_producers(obj, needle):
    with pytest.raises(TypeError) as info:
        memres.from_dlpack(obj)
    assert needle in str(info.value)


def test_capsule_consumed_once(host):
    src = host.allocate(8)
    for capsule in (src.__dlpack__(max_version=(1, 0)), src.__dlpack__()):
        memres.from_dlpack(capsule).close()
        with pytest.raises(ValueError):
            memres.from_dlpack(capsule)
    src.close()
