"""Every exception: its class, its builtin base, message, domain and code."""
import errno
import os
import subprocess
import sys

import pytest

import memres
from conftest import MODE, IndexInt

DOMAIN = "memres-error-quark"


def test_hierarchy():
    assert issubclass(memres.Error, Exception)
    for cls, builtin in ((memres.OutOfMemoryError, MemoryError),
                         (memres.InvalidArgumentError, ValueError),
                         (memres.ClosedError, ValueError),
                         (memres.FileError, OSError),
                         (memres.NoDeviceError, RuntimeError),
                         (memres.NotSupportedError, NotImplementedError),
                         (memres.NotSupportedError, RuntimeError),
                         (memres.ClosedError, RuntimeError),
                         (memres.OutOfRangeError, ValueError),
                         (memres.OutOfRangeError, OverflowError)):
        assert issubclass(cls, memres.Error) and issubclass(cls, builtin)
    assert issubclass(memres.OutOfRangeError, memres.InvalidArgumentError)


def check(info, cls, code):
    err = info.value
    assert type(err) is cls
    assert err.domain == DOMAIN
    assert err.code == code
    assert isinstance(err.message, str) and err.message
    assert str(err) == err.message


def test_bad_spec():
    with pytest.raises(ValueError) as info:
        memres.Resource("host:alignment=")
    check(info, memres.InvalidArgumentError, memres.ErrorCode.INVALID_ARGUMENT)
    with pytest.raises(memres.InvalidArgumentError) as info:
        memres.Resource("host:nosuchoption=1")
    assert "nosuchoption" in info.value.message


def test_unknown_kind():
    with pytest.raises(ValueError) as info:
        memres.Resource("nosuchkind")
    check(info, memres.InvalidArgumentError, memres.ErrorCode.NOT_FOUND)
    assert "nosuchkind" in info.value.message


def test_unknown_name(tmp_path, monkeypatch):
    config = tmp_path / "resources.conf"
    config.write_text("[small]\nspec=limit:max=1KiB>host\n")
    monkeypatch.setenv("MEMRES_CONFIG", str(config))
    assert memres.Resource("@small").kind == "limit"
    with pytest.raises(memres.InvalidArgumentError) as info:
        memres.Resource("@missing")
    check(info, memres.InvalidArgumentError, memres.ErrorCode.NOT_FOUND)


def test_out_of_memory():
    mr = memres.Resource("limit:max=1KiB>host")
    with pytest.raises(MemoryError) as info:
        mr.allocate(4096)
    check(info, memres.OutOfMemoryError, memres.ErrorCode.OUT_OF_MEMORY)


def test_closed(host):
    buf = host.allocate(16)
    buf.close()
    for call in (lambda: buf.fill(0), lambda: buf.read(), lambda: buf.__dlpack__(),
                 lambda: memoryview(buf), lambda: buf.copy_to(host.allocate(16))):
        with pytest.raises(ValueError) as info:
            call()
        check(info, memres.ClosedError, memres.ErrorCode.CLOSED)


def test_bad_fill(host):
    buf = host.allocate(6)
    with pytest.raises(memres.InvalidArgumentError) as info:
        buf.fill(0, width=4)
    check(info, memres.InvalidArgumentError, memres.ErrorCode.INVALID_ARGUMENT)
    with pytest.raises(memres.InvalidArgumentError):
        buf.fill(0x1FF, width=1)
    buf.close()


def test_copy_sizes_differ(host):
    a, b = host.allocate(16), host.allocate(32)
    with pytest.raises(memres.InvalidArgumentError):
        a.copy_to(b)
    a.close()
    b.close()


def test_not_supported(host):
    # what a kind cannot do: memres.NotSupportedError, a NotImplementedError and so a
    # RuntimeError (cuda.core's for IPC on a resource that is not IPC-enabled); it was a plain
    # memres.Error, which neither caught (this test called host.stats(), which works, and
    # asserted nothing)
    with pytest.raises(NotImplementedError) as info:
        host.trim()  # host memory keeps nothing to trim
    check(info, memres.NotSupportedError, memres.ErrorCode.NOT_SUPPORTED)
    buf = host.allocate(8)
    with pytest.raises(RuntimeError) as info:
        buf.export_message()
    check(info, memres.NotSupportedError, memres.ErrorCode.NOT_SUPPORTED)
    buf.close()


CHILD = r"""
import os, sys
os.setuid(65534) if os.getuid() == 0 else None
import memres
try:
    memres.Resource("@any")
except OSError as err:
    import errno
    assert isinstance(err, memres.FileError), type(err)
    assert err.domain == "g-file-error-quark", err.domain
    assert err.code == 2, err.code  # G_FILE_ERROR_ACCES
    assert err.errno == errno.EACCES, err.errno
    sys.exit(0)
sys.exit(1)
"""


def test_file_error(tmp_path):
    config = tmp_path / "resources.conf"
    config.write_text("[any]\nspec=host\n")
    config.chmod(0)
    tmp_path.chmod(0o755)
    env = dict(os.environ, MEMRES_CONFIG=str(config))
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    result = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd="/")
    assert result.returncode == 0


FILE_DOMAIN = "g-file-error-quark"
# GFileError codes: what g_file_error_from_errno() gives the errno of each
G_FILE_ERROR_ISDIR, G_FILE_ERROR_NOENT, G_FILE_ERROR_NOTDIR = 1, 4, 5


def check_file_error(info, code, errno_value, needle):
    err = info.value
    assert type(err) is memres.FileError
    assert isinstance(err, OSError) and isinstance(err, memres.Error)
    assert err.domain == FILE_DOMAIN
    assert err.code == code
    assert err.errno == errno_value
    assert err.strerror == os.strerror(errno_value)
    assert needle in err.message
    assert str(err) == err.message  # the message kept, not "[Errno N] ..."


def test_log_path_file_errors(tmp_path):
    """A log adaptor's path that cannot be opened is a FileError (an OSError) with errno, not a
    ValueError; within a stack too, under its "layer N of M" prefix."""
    missing = tmp_path / "no-such-dir" / "x.csv"
    afile = tmp_path / "a-file"
    afile.write_text("")
    cases = ((missing, G_FILE_ERROR_NOENT, errno.ENOENT),
             (afile / "x.csv", G_FILE_ERROR_NOTDIR, errno.ENOTDIR),
             (tmp_path, G_FILE_ERROR_ISDIR, errno.EISDIR))
    for path, code, errno_value in cases:
        for spec, prefix in (("log:path=%s>host", "layer 1 of 2"),
                             ("stats>log:path=%s>host", "layer 2 of 3")):
            with pytest.raises(OSError) as info:
                memres.Resource(spec % path)
            check_file_error(info, code, errno_value, 'cannot open "%s"' % path)
            assert info.value.message.startswith(prefix + ' (kind "log"): ')
    # FileNotFoundError's test, on errno
    try:
        memres.Resource("log:path=%s>host" % missing)
    except OSError as err:
        assert err.errno == errno.ENOENT
    else:
        raise AssertionError("accepted")
    # a bad spec stays a ValueError
    with pytest.raises(memres.InvalidArgumentError):
        memres.Resource("log:path=>host")


def test_config_file_errors(tmp_path, monkeypatch):
    """MEMRES_CONFIG that cannot be read is a FileError with errno; a malformed one stays an
    InvalidArgumentError."""
    afile = tmp_path / "a-file"
    afile.write_text("")
    cases = ((tmp_path / "missing.conf", G_FILE_ERROR_NOENT, errno.ENOENT),
             (afile / "x.conf", G_FILE_ERROR_NOTDIR, errno.ENOTDIR),
             (tmp_path, G_FILE_ERROR_ISDIR, errno.EISDIR))
    for path, code, errno_value in cases:
        monkeypatch.setenv("MEMRES_CONFIG", str(path))
        for spec in ("@x", "stats>@x"):
            with pytest.raises(OSError) as info:
                memres.Resource(spec)
            check_file_error(info, code, errno_value, "MEMRES_CONFIG: config file %s" % path)
    bad = tmp_path / "bad.conf"
    bad.write_text("[x]\nnot a key line\n")
    monkeypatch.setenv("MEMRES_CONFIG", str(bad))
    with pytest.raises(ValueError) as info:
        memres.Resource("@x")
    check(info, memres.InvalidArgumentError, memres.ErrorCode.INVALID_ARGUMENT)


def test_no_driver():
    if MODE != "host":
        pytest.skip("a driver loads in this mode")
    with pytest.raises(RuntimeError) as info:
        memres.Resource("dmr")
    check(info, memres.NoDeviceError, memres.ErrorCode.NO_DRIVER)


def test_int_arguments_out_of_range(host):
    # a negative or too large int argument: cuda.core's OverflowError, and also the ValueError
    # and memres.Error a Python user catches (allocate(-1) was a bare OverflowError, trim(-1)
    # and read(-1) bare ValueErrors, read(0, 2**64) and default_resource(2**70) bare
    # OverflowErrors from the int conversions, none of them with a domain or code)
    buf = host.allocate(16)
    buf.fill(0x5A)
    calls = [
        (lambda: host.allocate(-1), "size must be an int from 0 to 2**64-1, not -1"),
        (lambda: host.allocate(size=1 << 64), "size must be an int from 0 to 2**64-1"),
        (lambda: host.allocate(16, stream=-1), "a stream handle must be an int from 0 to 2**64-1"),
        (lambda: host.trim(-1), "bytes_to_keep must be an int from 0 to 2**64-1, not -1"),
        (lambda: buf.read(-1), "offset must be >= 0"),
        (lambda: buf.read(1 << 64), "offset must be an int from 0 to 2**64-1"),
        (lambda: buf.read(0, -1), "size must be None (to the end) or an int of 0 or more"),
        (lambda: buf.read(0, 1 << 64), "size must be None (to the end) or an int from 0 to 2**64-1"),
        (lambda: buf.write(b"x", offset=-1), "offset must be >= 0"),
        (lambda: buf.write(b"x", 1 << 70), "offset must be an int from 0 to 2**64-1"),
        (lambda: buf.fill(-1), "fill value must be an int from 0 to 2**32-1"),
        (lambda: buf.fill(1, width=1 << 32), "fill width must be an int from 0 to 2**32-1"),
        (lambda: memres.Buffer.from_handle(-1, 8), "ptr must be an int from 0 to 2**64-1, not -1"),
        (lambda: memres.Buffer.from_handle(buf.handle, -8), "size must be an int from 0 to 2**64-1"),
        (lambda: memres.default_resource(1 << 70), "device past 2**31-1"),
        (lambda: memres.default_resource(device=-(1 << 40)), "device below -2**31"),
        (lambda: memres.set_device_default_tag(1 << 70, "t"), "device past 2**31-1"),
    ]
    for call, message in calls:
        with pytest.raises(memres.OutOfRangeError) as info:
            call()
        err = info.value
        assert isinstance(err, ValueError) and isinstance(err, OverflowError)
        assert isinstance(err, memres.InvalidArgumentError)
        assert (err.domain, err.code) == (DOMAIN, memres.ErrorCode.INVALID_ARGUMENT)
        assert err.message.startswith(message) and str(err) == err.message
    # nothing was written, and in-range NumPy-style ints (__index__) still work
    assert buf.read() == b"\x5a" * 16
    assert buf.read(IndexInt(14), IndexInt(2)) == b"\x5a\x5a"
    buf.write(b"\x01", offset=IndexInt(15))
    assert buf.read(15) == b"\x01"
    buf.close()


def test_bool_is_not_a_size(host):
    # True and False are ints to Python, but never a size, offset or address: allocate(True)
    # made a 1-byte buffer, read(True) read from offset 1 (as a stream handle, a bool was a
    # TypeError already); torch.empty(True) refuses it too
    buf = host.allocate(16)
    calls = [
        (lambda: host.allocate(True), "size must be an int, not bool"),
        (lambda: host.allocate(size=False), "size must be an int, not bool"),
        (lambda: host.trim(False), "bytes_to_keep must be an int, not bool"),
        (lambda: buf.read(True), "offset must be an int, not bool"),
        (lambda: buf.read(0, True), "size must be None (to the end) or an int, not bool"),
        (lambda: buf.write(b"x", True), "offset must be an int, not bool"),
        (lambda: memres.Buffer.from_handle(buf.handle, True), "size must be an int, not bool"),
        (lambda: memres.Buffer.from_handle(True, 0), "ptr must be an int, not bool"),
    ]
    for call, message in calls:
        with pytest.raises(TypeError) as info:
            call()
        assert str(info.value) == message
        assert not isinstance(info.value, memres.Error)
    # ints and __index__ ints still are
    assert host.allocate(1).size == 1 and host.allocate(IndexInt(2)).size == 2
    assert buf.read(IndexInt(15), 1) == buf.read(15)
    buf.close()


def test_bad_sleep_mode_is_invalid_argument(host):
    # a sleep mode that does not exist was a bare ValueError, without domain or code
    with pytest.raises(memres.InvalidArgumentError) as info:
        host.sleep("weights", mode="bogus")
    check(info, memres.InvalidArgumentError, memres.ErrorCode.INVALID_ARGUMENT)
    assert 'sleep mode "bogus"' in info.value.message


NOT_UTF8_CHILD = r"""
import memres
try:
    memres.Resource("nosuchkind")
except memres.InvalidArgumentError as err:
    assert err.code == memres.ErrorCode.NOT_FOUND, err.code
    assert "pl\\xff" in err.message and str(err) == err.message, err.message
    print("ok")
"""


def test_error_message_not_utf8(tmp_path):
    # an error whose text is not UTF-8 (a plugin directory named in another encoding, which the
    # unknown-kind message lists) was a UnicodeDecodeError in place of the memres error; its
    # bytes are \xNN escapes now
    plugins = os.path.join(os.fsencode(tmp_path), b"pl\xff")
    os.mkdir(plugins)
    env = {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()
           if k != "MEMRES_PLUGIN_PATH"}
    env[b"MEMRES_PLUGIN_PATH"] = plugins
    env[b"PYTHONPATH"] = os.fsencode(os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", NOT_UTF8_CHILD], env=env, cwd="/",
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_fastcall_argument_errors(host):
    # the METH_FASTCALL methods' own parser (args.c) says what CPython's says, in its grammar:
    # "close() takes at most 1 arguments (2 given)" was its plural for one
    buf = host.allocate(8)
    for call, most in ((buf.close, 1), (buf.set_deallocation_stream, 1), (host.allocate, 2),
                       (buf.copy_to, 2)):
        name = call.__name__
        args = (None,) * (most + 1)
        plural = "" if most == 1 else "s"
        with pytest.raises(TypeError) as info:
            call(*args)
        assert str(info.value) == "%s() takes at most %d argument%s (%d given)" % (
            name, most, plural, most + 1)
        with pytest.raises(TypeError, match=r"^%s\(\) got an unexpected keyword argument 'x'$"
                           % name):
            call(x=1)
    with pytest.raises(TypeError, match=r"^allocate\(\) missing required argument 'size'$"):
        host.allocate(stream=None)
    with pytest.raises(TypeError, match=r"^allocate\(\) got multiple values for argument 'size'$"):
        host.allocate(8, size=8)
    assert not buf.closed
    buf.close()
