"""Every exception: its class, its builtin base, message, domain and code."""
import os
import subprocess
import sys

import pytest

import memres
from conftest import MODE

DOMAIN = "memres-error-quark"


def test_hierarchy():
    assert issubclass(memres.Error, Exception)
    for cls, builtin in ((memres.OutOfMemoryError, MemoryError),
                         (memres.InvalidArgumentError, ValueError),
                         (memres.ClosedError, ValueError),
                         (memres.FileError, OSError),
                         (memres.NoDeviceError, RuntimeError)):
        assert issubclass(cls, memres.Error) and issubclass(cls, builtin)


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


def test_stats_not_supported(host):
    try:
        host.stats()
    except memres.Error as err:
        assert type(err) is memres.Error
        assert err.code == memres.ErrorCode.NOT_SUPPORTED


CHILD = r"""
import os, sys
os.setuid(65534) if os.getuid() == 0 else None
import memres
try:
    memres.Resource("@any")
except OSError as err:
    assert isinstance(err, memres.FileError), type(err)
    assert err.code == memres.ErrorCode.PERMISSION_DENIED, err.code
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


def test_no_driver():
    if MODE != "host":
        pytest.skip("a driver loads in this mode")
    with pytest.raises(RuntimeError) as info:
        memres.Resource("dmr")
    check(info, memres.NoDeviceError, memres.ErrorCode.NO_DRIVER)
