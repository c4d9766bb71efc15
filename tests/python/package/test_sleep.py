"""Sleep and wake from Python (docs/sleep.md): Resource.sleep()/wake()/is_asleep() over a stack
that can sleep (cache>vmm, on the fake driver or a GPU), contents kept by the backup and file
modes, the refusals with their domain and code, and a stack that cannot sleep."""
import errno
import os

import pytest

import memres

SLEEP_DOMAIN = "memres-sleep-error-quark"


@pytest.fixture
def vmm_stack(device):
    try:
        return memres.Resource("cache:max_block=4MiB>vmm")
    except memres.Error as e:
        pytest.skip(str(e))


def _write(buf, seed):
    data = bytes((i * 7 + seed) & 0xFF for i in range(buf.size))
    buf.write(data)
    return data


@pytest.mark.parametrize("mode", ["backup", "file"])
def test_round_trip(vmm_stack, tmp_path, mode):
    with memres.tag("py-sleep-weights"):
        a = vmm_stack.allocate(8 << 20)
        b = vmm_stack.allocate(1 << 20)
    want_a, want_b = _write(a, 1), _write(b, 2)
    address = (a.handle, b.handle)
    kwargs = {"path": str(tmp_path / "w.bin")} if mode == "file" else {}
    vmm_stack.sleep("py-sleep-weights", mode=mode, **kwargs)
    assert vmm_stack.is_asleep("py-sleep-weights")
    with pytest.raises(memres.Error) as e:
        a.read(0, 16)
    assert (e.value.domain, e.value.code) == (SLEEP_DOMAIN, memres.SleepErrorCode.ASLEEP)
    with memres.tag("py-sleep-weights"), pytest.raises(memres.Error) as e:
        vmm_stack.allocate(4096)
    assert e.value.code == memres.SleepErrorCode.TAG_ASLEEP
    # 0 bytes too (an empty buffer was made under the sleeping tag)
    with memres.tag("py-sleep-weights"), pytest.raises(memres.Error) as e:
        vmm_stack.allocate(0)
    assert e.value.code == memres.SleepErrorCode.TAG_ASLEEP
    # no new export of a sleeping buffer: DLPack (both capsules), the CUDA array interface
    for export in (lambda: a.__dlpack__(max_version=(1, 0)), lambda: a.__dlpack__(),
                   lambda: a.__cuda_array_interface__):
        with pytest.raises(memres.Error) as e:
            export()
        assert (e.value.domain, e.value.code) == (SLEEP_DOMAIN, memres.SleepErrorCode.ASLEEP)
        assert "py-sleep-weights" in str(e.value)
    with pytest.raises(memres.Error) as e:
        vmm_stack.sleep("py-sleep-weights")
    assert e.value.code == memres.SleepErrorCode.ALREADY_ASLEEP
    vmm_stack.wake("py-sleep-weights")
    assert not vmm_stack.is_asleep("py-sleep-weights")
    assert (a.handle, b.handle) == address
    assert a.read(0, a.size) == want_a and b.read(0, b.size) == want_b
    with pytest.raises(memres.Error) as e:
        vmm_stack.wake("py-sleep-weights")
    assert e.value.code == memres.SleepErrorCode.NOT_ASLEEP
    a.close()
    b.close()


def test_file_path_like(vmm_stack, tmp_path):
    # path takes what open() takes: a pathlib.Path and bytes too (a Path was a TypeError)
    with memres.tag("py-sleep-path"):
        a = vmm_stack.allocate(1 << 20)
    want = _write(a, 3)
    for path in (tmp_path / "p.bin", bytes(tmp_path / "b.bin")):
        vmm_stack.sleep("py-sleep-path", mode="file", path=path)
        assert vmm_stack.is_asleep("py-sleep-path")
        vmm_stack.wake("py-sleep-path")
        assert a.read() == want
    with pytest.raises(ValueError):
        vmm_stack.sleep("py-sleep-path", mode="file", path=str(tmp_path / "n\0.bin"))
    with pytest.raises(TypeError):
        vmm_stack.sleep("py-sleep-path", mode="file", path=3)
    assert not vmm_stack.is_asleep("py-sleep-path")
    a.close()


def test_file_refusals(vmm_stack, tmp_path):
    # a sleep file that cannot be one: a FileError (an OSError) with SleepErrorCode.FILE, the
    # tag awake; the file of another sleep, the same
    with memres.tag("py-sleep-f1"):
        a = vmm_stack.allocate(1 << 20)
    with memres.tag("py-sleep-f2"):
        b = vmm_stack.allocate(1 << 20)
    for path in ("/dev/null", str(tmp_path)):
        with pytest.raises(OSError) as e:
            vmm_stack.sleep("py-sleep-f1", mode="file", path=path)
        assert isinstance(e.value, memres.FileError)
        assert (e.value.domain, e.value.code) == (SLEEP_DOMAIN, memres.SleepErrorCode.FILE)
        assert "not a regular file" in str(e.value)
        assert (e.value.errno, e.value.strerror) == (None, None)  # no call of the system failed
        assert not vmm_stack.is_asleep("py-sleep-f1")
    held = str(tmp_path / "held.bin")
    vmm_stack.sleep("py-sleep-f1", mode="file", path=held)
    with pytest.raises(memres.FileError, match="holds the contents of another sleep") as e:
        vmm_stack.sleep("py-sleep-f2", mode="file", path=held)
    # the errno of the message's "(flock(): REASON, errno N)", its text; str() the message
    assert e.value.errno == errno.EWOULDBLOCK
    assert e.value.strerror == os.strerror(errno.EWOULDBLOCK)
    assert str(e.value) == e.value.message and "errno %d)" % errno.EWOULDBLOCK in str(e.value)
    # a file that cannot be opened: "REASON (errno N)"
    missing = tmp_path / "no-such-dir" / "errno 5) in a path.bin"
    with pytest.raises(OSError) as e:
        vmm_stack.sleep("py-sleep-f2", mode="file", path=str(missing))
    assert isinstance(e.value, memres.FileError)
    assert (e.value.errno, e.value.strerror) == (errno.ENOENT, os.strerror(errno.ENOENT))
    assert str(e.value).endswith("(errno %d)" % errno.ENOENT)
    assert not vmm_stack.is_asleep("py-sleep-f2")
    vmm_stack.wake("py-sleep-f1")
    a.close()
    b.close()


def test_bad_arguments(vmm_stack):
    with pytest.raises(ValueError):
        vmm_stack.sleep("py-sleep-x", mode="swap")
    with pytest.raises(TypeError):
        vmm_stack.is_asleep(3)


def test_argument_errors_name_the_call(host):
    # sleep() and wake() parsed their arguments without a name ("function missing required
    # argument 'tag' (pos 1)"), and read the tag as a C string: a NUL was a plain ValueError
    # ("embedded null character") and None "argument 1 must be str", where is_asleep(), tag()
    # and tag_counts() give the tag's own errors
    for call in (host.sleep, host.wake):
        name = call.__name__
        with pytest.raises(TypeError, match=r"^%s\(\) missing required argument 'tag'" % name):
            call()
        with pytest.raises(TypeError, match=r"^%s\(\) takes at most 1 positional argument"
                           % name):
            call("py-sleep-args", "backup")
        with pytest.raises(TypeError, match=r"'bogus'.*\b%s\(\)|%s\(\).*'bogus'" % (name, name)):
            call("py-sleep-args", bogus=1)
        for tag in (None, 3, b"py-sleep-args"):
            with pytest.raises(TypeError, match="^a tag is a str$"):
                call(tag)
        for tag in ("py\0sleep", "py-sleep\0"):
            with pytest.raises(memres.InvalidArgumentError, match="control character U\\+0000"
                               ) as e:
                call(tag)
            assert (e.value.domain, e.value.code) == ("memres-tag-error-quark",
                                                      memres.TagErrorCode.INVALID)
    with pytest.raises(TypeError, match=r"^sleep\(\) argument .*must be str, not None"):
        host.sleep("py-sleep-args", mode=None)


def test_cannot_sleep(host):
    with memres.tag("py-sleep-host"):
        host.allocate(64).close()
    with pytest.raises(memres.Error) as e:
        host.sleep("py-sleep-host")
    assert e.value.code == memres.ErrorCode.NOT_SUPPORTED
    assert "vmm" in str(e.value)
    assert not host.is_asleep("py-sleep-host")
