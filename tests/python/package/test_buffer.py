"""memres.Buffer: properties, close, the context manager, the transfers."""
import sys

import pytest

import memres


def test_properties(host):
    buf = host.allocate(100)
    assert buf.size == 100
    assert buf.handle != 0 and buf.handle % 256 == 0
    assert buf.device_id == -1
    assert buf.is_host_accessible and not buf.is_device_accessible
    assert not buf.closed
    assert memres.MemoryFlags.HOST_ACCESSIBLE in memres.MemoryFlags(buf.flags)
    assert buf.memory_resource == host
    assert repr(buf) == "<memres.Buffer 100 bytes at 0x%x on device -1>" % buf.handle
    buf.close()
    assert buf.closed and buf.size == 0 and buf.handle == 0 and buf.device_id == -1
    assert buf.memory_resource is None and repr(buf) == "<memres.Buffer closed>"


def test_not_constructible():
    with pytest.raises(TypeError):
        memres.Buffer()


def test_close_twice_and_arguments(host):
    buf = host.allocate(8)
    buf.close()
    buf.close()
    buf.close(stream=None)
    buf = host.allocate(8)
    with pytest.raises(TypeError):
        buf.close(1, 2)
    with pytest.raises(TypeError):
        buf.close(nonsense=1)
    buf.close(0)


def test_context_manager(host):
    with host.allocate(64) as buf:
        assert not buf.closed
    assert buf.closed
    with pytest.raises(KeyError):
        with host.allocate(64) as buf:
            raise KeyError("x")
    assert buf.closed
    # a closed buffer cannot be entered (it raised nothing and ran the block on no memory);
    # the unbound form says the same; leaving (closing again) still does nothing
    with pytest.raises(memres.ClosedError) as info:
        with buf:
            raise AssertionError("the block of a closed buffer ran")
    assert info.value.code == memres.ErrorCode.CLOSED
    with pytest.raises(memres.ClosedError):
        memres.Buffer.__enter__(buf)
    assert buf.__exit__(None, None, None) is None


def _close_refused_in_a_with_block(buf, body):
    """Leaves a with block of buf by raising body (None: by its end) while a memoryview of buf
    is held, so that the close at the block's end fails (BufferError); returns that error."""
    view = memoryview(buf)
    try:
        with pytest.raises(BufferError) as info:
            with buf:
                if body is not None:
                    raise body
    finally:
        view.release()
    return info.value


def test_with_block_whose_close_fails(host):
    """A with block whose close() fails: the close's error propagates, the block's exception
    kept as its __context__ (the traceback prints both, the block's first: "During handling of
    the above exception, another exception occurred"), the buffer left open. That is what
    io.BytesIO does (its close under a held export) and contextlib.ExitStack (a callback that
    raises), checked here side by side; a with block whose body raised nothing raises the
    close's error alone."""
    import contextlib
    import io
    import traceback

    buf = host.allocate(16)
    body = KeyError("body")
    error = _close_refused_in_a_with_block(buf, body)
    assert "1 memoryview" in str(error)
    assert error.__context__ is body and error.__cause__ is None
    assert not error.__suppress_context__
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    assert text.index("KeyError: 'body'") < text.index("During handling") \
        < text.index("BufferError: cannot close the buffer")
    assert not buf.closed and buf.size == 16
    error = _close_refused_in_a_with_block(buf, None)
    assert error.__context__ is None and not buf.closed
    with buf:  # the view released: the block's end closes it
        pass
    assert buf.closed

    # the standard library's two, for the same case
    body = KeyError("body")
    with pytest.raises(BufferError) as info:
        with io.BytesIO(b"abc") as f:
            export = f.getbuffer()
            raise body
    export.release()
    assert info.value.__context__ is body

    def refuse():
        raise BufferError("refused")

    body = KeyError("body")
    with pytest.raises(BufferError) as info:
        with contextlib.ExitStack() as stack:
            stack.callback(refuse)
            raise body
    assert info.value.__context__ is body


def test_with_block_whose_close_fails_on_the_driver(device, fake_counts, fake_fail_call):
    """The same with a free the driver refuses (cuMemFreeAsync: CUDA_ERROR_INVALID_HANDLE): the
    close's memres.Error, the block's exception as its __context__, the memory still held; the
    next close frees it."""
    live = fake_counts()["pool_allocations"]
    buf = device.allocate(4096)
    buf.fill(0x5A)
    body = KeyError("body")
    fake_fail_call("cuMemFreeAsync", 1, 400)  # CUDA_ERROR_INVALID_HANDLE
    with pytest.raises(memres.Error) as info:
        with buf:
            raise body
    assert info.value.domain == "memres-cuda-error-quark" and info.value.code == 400
    assert info.value.__context__ is body
    assert not buf.closed and buf.read(0, 4) == b"\x5a" * 4
    assert fake_counts()["pool_allocations"] == live + 1
    buf.close()
    assert buf.closed and fake_counts()["pool_allocations"] == live


def test_empty_buffer():
    """allocate(0): an empty Buffer (memres_resource_allocate()'s gtk-doc): open, 0 bytes at
    handle 0, usable for 0 bytes, closable (with a with block, twice); stats() counts it among the live buffers (n_buffers) with 0 bytes
    used, but it is no allocation of any layer: a stats layer's tag counts leave it out."""
    mr = memres.Resource("stats>host")
    full = mr.allocate(100)
    with memres.tag("py-empty"):
        buf = mr.allocate(0)
    assert buf.size == 0 and buf.handle == 0 and not buf.closed and buf.tag == "py-empty"
    assert buf.is_host_accessible and buf.device_id == -1
    assert repr(buf) == "<memres.Buffer 0 bytes at 0x0 on device -1>"
    assert mr.stats()["n_buffers"] == 2 and mr.stats()["used_current"] == 100
    assert mr.tag_counts("py-empty") == dict.fromkeys(
        ("bytes_current", "bytes_peak", "bytes_total", "count_current", "count_peak",
         "count_total"), 0)
    assert "py-empty" not in mr.tags()
    assert buf.read() == b"" and buf.write(b"") is None and buf.fill(0xFF) is None
    view = memoryview(buf)
    assert view.nbytes == 0 and bytes(view) == b""
    view.release()
    copy = buf.copy_to()
    assert copy.size == 0 and copy.handle == 0 and copy.memory_resource == mr
    assert mr.stats()["n_buffers"] == 3
    copy.close()
    with buf:
        pass
    assert buf.closed
    buf.close()
    assert mr.stats()["n_buffers"] == 1 and mr.stats()["used_current"] == 100
    full.close()
    assert mr.stats()["n_buffers"] == 0


def test_fill_read_write(host):
    buf = host.allocate(16)
    buf.fill(0xAB)
    assert buf.read() == b"\xab" * 16
    buf.fill(0x01020304, width=4)
    assert buf.read(0, 4) == (0x01020304).to_bytes(4, "little")
    buf.fill(value=0x0102, width=2, stream=None)
    assert buf.read(size=2) == (0x0102).to_bytes(2, "little")
    buf.write(b"hello", offset=3)
    assert buf.read(3, 5) == b"hello"
    assert buf.read(offset=16) == b""
    # size=None is the documented default (to the end); a negative size is refused
    assert buf.read(3, None) == buf.read(3) == buf.read(size=None, offset=3)
    assert len(buf.read(3, None)) == 13
    for bad in (-1, -2):
        with pytest.raises(ValueError, match="size must be None"):
            buf.read(0, bad)
    with pytest.raises(TypeError):
        buf.read(0, "4")
    with pytest.raises(ValueError, match="offset must be >= 0"):
        buf.read(-1)
    with pytest.raises(ValueError):
        buf.write(b"x", offset=-1)
    with pytest.raises(memres.InvalidArgumentError):
        buf.write(b"x" * 17)
    with pytest.raises(ValueError):
        buf.fill(1 << 33)
    buf.close()


def test_fill_out_of_range(host):
    # fill's value and width are not taken modulo 2**64 or 2**32 (fill(2**64 + 0xAB) filled
    # with 0xAB, width=2**32 + 1 was width 1)
    buf = host.allocate(16)
    buf.fill(0x11)
    for kwargs in ({"value": 2**64 + 0xAB}, {"value": 2**32}, {"value": -1},
                   {"value": 7, "width": 2**32 + 1}, {"value": 7, "width": -1}):
        with pytest.raises(ValueError, match="fill (value|width) must be an int from 0 to"):
            buf.fill(**kwargs)
    with pytest.raises(TypeError):
        buf.fill(1.0)
    # a bool is no byte value or width (fill(True) filled with 0x01): TypeError, as for sizes
    for kwargs in ({"value": True}, {"value": False}, {"value": 7, "width": True}):
        with pytest.raises(TypeError, match="fill (value|width) must be an int, not a bool"):
            buf.fill(**kwargs)
    assert buf.read() == b"\x11" * 16
    buf.close()


def test_fill_bytes_value_device(device):
    buf = device.allocate(12)
    buf.fill(b"\xca\xfe")
    assert buf.read() == b"\xca\xfe" * 6
    buf.fill(b"\x01\x02\x03\x04")
    assert buf.read() == b"\x01\x02\x03\x04" * 3
    buf.close()


def test_read_past_end(host):
    # read() past the end is memres's refusal before any bytes are made (read(0, 2**62) was a
    # MemoryError, read(0, sys.maxsize) an OverflowError)
    buf = host.allocate(16)
    buf.fill(0x11)
    # an offset past the end, with or without a size: the same refusal (read(17) was a plain
    # ValueError, write(b"", 17) InvalidArgumentError)
    for offset, size in ((0, 2**62), (0, sys.maxsize), (8, 9), (16, 1), (17, None), (17, 0),
                         (sys.maxsize, None)):
        with pytest.raises(memres.InvalidArgumentError) as info:
            buf.read(offset, size)
        assert (info.value.domain, info.value.code) == ("memres-error-quark",
                                                        memres.ErrorCode.INVALID_ARGUMENT)
        assert "outside the buffer of 16 bytes" in str(info.value)
    assert buf.read(8, 8) == b"\x11" * 8
    buf.close()


def test_read_past_end_names_the_size_asked(host):
    # an offset past the end with a size: the message says the size given (read(17, 2) said
    # "range of 0 bytes at offset 17", as write(b"ab", 17) says "range of 2 bytes")
    buf = host.allocate(16)
    for offset, size in ((17, 2), (2**64 - 1, 2), (2**63, 1), (8, 9)):
        with pytest.raises(memres.InvalidArgumentError) as info:
            buf.read(offset, size)
        assert "range of %d bytes at offset %d is outside the buffer of 16 bytes" % (
            size, offset) in str(info.value)
        with pytest.raises(memres.InvalidArgumentError) as info:
            buf.write(b"\0" * size, offset)
        assert "range of %d bytes at offset %d" % (size, offset) in str(info.value)
    # without a size (to the end), nothing is asked past the offset
    with pytest.raises(memres.InvalidArgumentError, match="range of 0 bytes at offset 17 "):
        buf.read(17)
    buf.close()


def test_copy_to_and_from(host):
    a, b = host.allocate(32), host.allocate(32)
    a.write(bytes(range(32)))
    a.copy_to(b)
    assert b.read() == bytes(range(32))
    b.fill(9)
    a.copy_from(b, stream=None)
    assert a.read() == b"\x09" * 32
    with pytest.raises(TypeError):
        a.copy_to(b"not a buffer")
    with pytest.raises(TypeError):
        a.copy_from()
    a.close()
    b.close()


def test_fill_with_a_bytes_pattern(host):
    # cuda.core's fill(value: int | bytes-like of 1, 2 or 4 bytes): the pattern repeated as it is
    # in memory (it was a TypeError: "'bytes' object cannot be interpreted as an integer")
    import array

    buf = host.allocate(8)
    buf.fill(b"\x01\x02")
    assert buf.read() == b"\x01\x02" * 4
    buf.fill(bytearray(b"\xaa\xbb\xcc\xdd"), stream=None)
    assert buf.read() == b"\xaa\xbb\xcc\xdd" * 2
    buf.fill(memoryview(b"\x07"))
    assert buf.read() == b"\x07" * 8
    buf.fill(array.array("B", [9, 8]), width=2)
    assert buf.read() == b"\x09\x08" * 4
    for bad, kwargs in ((b"", {}), (b"abc", {}), (b"abcdefgh", {}), (b"ab", {"width": 4})):
        with pytest.raises(memres.InvalidArgumentError) as info:
            buf.fill(bad, **kwargs)
        assert info.value.code == memres.ErrorCode.INVALID_ARGUMENT
    # a ValueError too, in words that say what is wrong
    for bad in (b"", b"\x01\x02\x03", b"\x00" * 8):
        with pytest.raises(ValueError, match="1, 2 or 4 bytes long"):
            buf.fill(bad)
    with pytest.raises(ValueError, match="differs from the 2 bytes"):
        buf.fill(b"\x01\x02", width=4)
    buf.fill(memoryview(b"\xee"), width=1)
    assert buf.read() == b"\xee" * 8
    buf.fill(array.array("B", [9, 8]), width=2)
    odd = host.allocate(7)
    with pytest.raises(memres.InvalidArgumentError, match="not a multiple of the fill width 2"):
        odd.fill(b"ab")
    with pytest.raises(TypeError):
        buf.fill("ab")
    assert buf.read() == b"\x09\x08" * 4  # the refusals wrote nothing
    odd.close()
    buf.close()


def test_copy_to_and_from_in_cuda_cores_words():
    # cuda.core's signatures: copy_to(dst=None, *, stream) returns dst, and without dst
    # allocates it from the buffer's memory resource; copy_from(src, *, stream). The keywords
    # the docs name (dst, src) were TypeErrors (the parameter was "other"), copy_to() without
    # dst a TypeError, and copy_to returned None.
    mr = memres.Resource("stats>host")
    a, b = mr.allocate(32), mr.allocate(32)
    a.write(bytes(range(32)))
    assert a.copy_to(dst=b, stream=None) is b and b.read() == bytes(range(32))
    b.fill(0x61)
    assert a.copy_from(src=b, stream=None) is None and a.read() == b"a" * 32
    a.write(bytes(range(100, 132)))
    for made in (a.copy_to(), a.copy_to(None, stream=0), a.copy_to(stream=None)):
        assert isinstance(made, memres.Buffer) and made is not a
        assert made.size == 32 and made.read() == bytes(range(100, 132))
        assert made.memory_resource is mr
        made.close()
    assert mr.stats()["n_buffers"] == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'other'"):
        a.copy_to(other=b)
    with pytest.raises(TypeError, match="missing required argument 'src'"):
        a.copy_from(stream=None)
    # no memory resource to allocate from: a clear ValueError, nothing allocated
    imported = memres.from_dlpack(a)
    with pytest.raises(ValueError, match="give dst"):
        imported.copy_to()
    imported.close()
    closed_mr = memres.Resource("host")
    orphan = closed_mr.allocate(8)
    closed_mr.close()
    with pytest.raises(memres.ClosedError):
        orphan.copy_to()
    orphan.close()
    # positional dst and src; a new buffer has memory of its own
    a.write(b"\x01\x02\x03\x04" * 8)
    c = a.copy_to()
    assert c.handle != a.handle and c.read() == b"\x01\x02\x03\x04" * 8
    assert a.copy_to(b) is b and b.read() == a.read()
    assert a.copy_from(c) is None
    c.close()
    # wrapped memory has no memres resource to allocate from: ValueError, nothing allocated
    view = memres.Buffer.from_handle(a.handle, 32)
    with pytest.raises(ValueError, match="no memres resource.*Buffer.from_handle()"):
        view.copy_to()
    view.close()
    # nor another library's tensor (the message named from_handle() alone): here a view's
    view = memres.Buffer.from_handle(a.handle, 32)
    wrapped = memres.from_dlpack(view)
    with pytest.raises(ValueError, match="no memres resource.*memres.from_dlpack()"):
        wrapped.copy_to()
    wrapped.close()
    view.close()
    closed = mr.allocate(8)
    closed.close()
    with pytest.raises(memres.ClosedError):
        closed.copy_to()
    assert mr.stats()["n_buffers"] == 2
    a.close()
    with pytest.raises(memres.ClosedError):
        a.copy_to()
    b.close()
    assert mr.stats()["n_buffers"] == 0


def test_copy_to_allocates_on_the_stream(device):
    src = device.allocate(4096, stream=2)
    src.fill(0x7E, stream=2)
    dst = src.copy_to(stream=2)
    assert dst.__cuda_array_interface__["stream"] == 2 and dst.device_id == src.device_id
    assert dst.read(0, 8, stream=2) == b"\x7e" * 8
    dst.close()
    src.close()


def test_is_managed_and_is_mapped(host):
    # cuda.core's names: Buffer.is_managed, Buffer.is_mapped, MemoryResource.is_managed (they
    # were AttributeErrors; the flags held them)
    buf = host.allocate(8)
    assert host.is_managed is False and buf.is_managed is False and buf.is_mapped is False
    buf.close()
    assert buf.is_managed is False and buf.is_mapped is False


def test_is_managed_device(device):
    mr = memres.Resource("stats>managed:device=0")
    buf = mr.allocate(64)
    assert mr.is_managed and buf.is_managed and not buf.is_mapped
    assert memres.MemoryFlags.MANAGED in memres.MemoryFlags(buf.flags)
    buf.close()
    assert not buf.is_managed
    assert device.is_managed is False and not device.allocate(8).is_managed


def test_copy_to_new_buffer_device(device):
    a = device.allocate(16)
    a.fill(b"\xab\xcd")
    b = a.copy_to(stream=None)
    assert b.device_id == a.device_id and b.is_device_accessible
    assert b.read() == b"\xab\xcd" * 8
    b.close()
    a.close()


def test_memoryview(host):
    buf = host.allocate(8)
    view = memoryview(buf)
    assert view.nbytes == 8 and not view.readonly
    view[:] = b"abcdefgh"
    assert buf.read() == b"abcdefgh"
    view.release()
    buf.close()


def test_close_refused_while_a_memoryview_is_held(host):
    # a close under a live memoryview freed the memory and the view read whatever came next
    buf = host.allocate(16)
    buf.write(b"0123456789abcdef")
    view = memoryview(buf)
    with pytest.raises(BufferError, match="1 memoryview"):
        buf.close()
    with pytest.raises(BufferError):
        with buf:
            pass
    assert not buf.closed and buf.size == 16
    assert bytes(view) == b"0123456789abcdef"
    second = memoryview(buf)
    view.release()
    with pytest.raises(BufferError, match="1 memoryview"):
        buf.close()
    second.release()
    buf.close()
    assert buf.closed
    with pytest.raises(memres.ClosedError) as info:
        memoryview(buf)
    assert info.value.code == memres.ErrorCode.CLOSED
    # a recycled object starts with no view
    again = host.allocate(16)
    again.close()


def test_device_buffer(device):
    buf = device.allocate(4096)
    assert buf.device_id == 0 and buf.is_device_accessible and not buf.is_host_accessible
    buf.fill(0x5A)
    assert buf.read(0, 8) == b"\x5a" * 8
    with pytest.raises(BufferError):
        memoryview(buf)
    host = memres.Resource("host")
    h = host.allocate(4096)
    buf.copy_to(h)
    assert h.read(4088) == b"\x5a" * 8
    h.fill(3)
    buf.copy_from(h, stream=0)
    assert buf.read(4000, 2) == b"\x03\x03"
    buf.close(stream=0)
    h.close()
