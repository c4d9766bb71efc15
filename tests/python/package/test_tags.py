"""Tags from Python (docs/tags.md): memres.tag() as a context manager and a decorator, a Buffer's
tag, the defaults of streams and devices, the counts per tag of a stats layer, each tag's peak
reset alone, and the errors with their domain and code."""
import threading

import pytest

import memres

TAG_DOMAIN = "memres-tag-error-quark"


def test_tag_scope_and_buffer_tag():
    mr = memres.Resource("stats>host")
    assert memres.current_tag() is None
    with memres.tag("py-weights"):
        assert memres.current_tag() == "py-weights"
        a = mr.allocate(1000)
        with memres.tag("py-kv"):
            b = mr.allocate(24)
        c = mr.allocate(8)
    d = mr.allocate(8)
    assert memres.current_tag() is None
    assert (a.tag, b.tag, c.tag, d.tag) == ("py-weights", "py-kv", "py-weights", None)
    assert "py-weights" in memres.tags() and "py-kv" in memres.tags()
    counts = mr.tag_counts("py-weights")
    assert counts == {
        "bytes_current": 1008,
        "bytes_peak": 1008,
        "bytes_total": 1008,
        "count_current": 2,
        "count_peak": 2,
        "count_total": 2,
    }
    assert set(mr.tags()) == {"py-weights", "py-kv"}
    for buf in (a, b, c, d):
        buf.close()
    assert a.tag is None  # closed
    assert mr.tag_counts("py-weights")["bytes_current"] == 0
    assert mr.tag_counts("py-kv")["bytes_peak"] == 24


def test_tag_scope_ends_on_exception():
    with pytest.raises(RuntimeError):
        with memres.tag("py-raises"):
            raise RuntimeError("boom")
    assert memres.current_tag() is None


def test_tag_decorator():
    mr = memres.Resource("host")

    @memres.tag("py-decorated")
    def make():
        return mr.allocate(16)

    with make() as buf:
        assert buf.tag == "py-decorated"
    assert memres.current_tag() is None


def test_reset_tag_peak_alone():
    mr = memres.Resource("stats>host")
    with memres.tag("py-phase-a"):
        a1 = mr.allocate(1024)
        a2 = mr.allocate(2048)
    with memres.tag("py-phase-b"):
        b1 = mr.allocate(512)
    a2.close()
    b1.close()
    mr.reset_tag_peak("py-phase-a")
    assert mr.tag_counts("py-phase-a")["bytes_peak"] == 1024
    assert mr.tag_counts("py-phase-a")["bytes_total"] == 3072
    assert mr.tag_counts("py-phase-b")["bytes_peak"] == 512
    a1.close()


def test_defaults_and_worker_thread():
    mr = memres.Resource("stats>host")
    memres.set_stream_default_tag(0x4000, "py-backward")
    memres.set_device_default_tag(-1, "py-host")
    try:
        seen = []

        def worker():
            with mr.allocate(64, stream=0x4000) as buf:
                seen.append(buf.tag)
            with mr.allocate(64, stream=0x5000) as buf:
                seen.append(buf.tag)

        with memres.tag("py-forward"):  # this thread's scope does not reach the worker
            t = threading.Thread(target=worker)
            t.start()
            t.join()
            with mr.allocate(64, stream=0x4000) as buf:
                assert buf.tag == "py-forward"  # the scope wins over the stream
        assert seen == ["py-backward", "py-host"]
    finally:
        memres.set_stream_default_tag(0x4000, None)
        memres.set_device_default_tag(-1, None)
    with mr.allocate(64, stream=0x4000) as buf:
        assert buf.tag is None


@pytest.mark.parametrize(
    "name, code",
    [("", "INVALID"), ("x" * 64, "INVALID"), ("a\nb", "INVALID"), ("kv\0junk", "INVALID")],
)
def test_invalid_names(name, code):
    # a bad argument: InvalidArgumentError, a ValueError too (it was a bare memres.Error)
    with pytest.raises(ValueError) as info:
        with memres.tag(name):
            pass
    assert isinstance(info.value, memres.InvalidArgumentError)
    assert info.value.domain == TAG_DOMAIN
    assert info.value.code == memres.TagErrorCode[code]
    assert memres.current_tag() is None


def test_errors():
    mr = memres.Resource("stats>host")
    with pytest.raises(memres.Error) as info:
        memres._memres._tag_pop(None)
    assert (info.value.domain, info.value.code) == (TAG_DOMAIN, memres.TagErrorCode.EMPTY)
    with memres.tag("py-errors"):
        with pytest.raises(memres.Error) as info:
            memres._memres._tag_pop("py-other")
        assert info.value.code == memres.TagErrorCode.MISMATCH
    with pytest.raises(memres.Error) as info:
        mr.tag_counts("py-never-used")
    assert (info.value.domain, info.value.code) == (TAG_DOMAIN, memres.TagErrorCode.UNKNOWN)
    with pytest.raises(memres.Error) as info:
        memres.Resource("host").tag_counts("py-errors")
    assert info.value.code == memres.ErrorCode.NOT_SUPPORTED
    with pytest.raises(TypeError):
        memres.tag(3).__enter__()


def test_nul_in_tag_refused():
    # a str with a NUL is not cut at it: memres.tag("kv\0junk") used to tag with "kv", and
    # is_asleep("kv\0x") to answer for "kv"; every function that takes a tag refuses it
    mr = memres.Resource("stats>host")
    calls = (lambda: memres._memres._tag_push("py-nul\0x"),
             lambda: memres._memres._tag_pop("py-nul\0x"),
             lambda: memres.set_stream_default_tag(0x4000, "py-nul\0x"),
             lambda: memres.set_device_default_tag(-1, "py-nul\0x"),
             lambda: mr.tag_counts("py-nul\0x"),
             lambda: mr.reset_tag_peak("py-nul\0x"),
             lambda: mr.is_asleep("py-nul\0x"))
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        assert isinstance(info.value, memres.InvalidArgumentError)
        assert (info.value.domain, info.value.code) == (TAG_DOMAIN, memres.TagErrorCode.INVALID)
        assert "U+0000" in str(info.value)
    assert memres.current_tag() is None
    assert "py-nul" not in memres.tags()
