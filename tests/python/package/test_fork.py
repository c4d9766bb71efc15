"""fork(), multiprocessing (fork and spawn), buffers sent between processes as messages."""
import multiprocessing
import os
import socket

import pytest

import memres


def child_allocates(queue):
    mr = memres.Resource("stats>host")
    with mr.allocate(4096) as buf:
        buf.fill(3)
        queue.put(buf.read(0, 2))


def test_os_fork(host):
    buf = host.allocate(64)
    buf.fill(1)
    pid = os.fork()
    if pid == 0:
        try:
            ok = buf.read(0, 1) == b"\x01"
            mr = memres.Resource("host")
            mr.allocate(10).close()
            os._exit(0 if ok else 1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    buf.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing(method):
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    p = ctx.Process(target=child_allocates, args=(queue,))
    p.start()
    assert queue.get(timeout=60) == b"\x03\x03"
    p.join(60)
    assert p.exitcode == 0


def child_imports(sock, spec, size):
    msg, fds, _, _ = socket.recv_fds(sock, 65536, 16)
    try:
        importer = memres.Resource(spec)
    except memres.Error as err:
        # a child of fork() after the parent used the driver cannot use it: a clear error
        sock.send(b"forked" if err.code == memres.ErrorCode.FORKED else b"error")
        return
    with memres.import_message(msg, fds) as buf:
        # cuda.core's Buffer.is_mapped: memory imported from another process
        ok = buf.size >= size and buf.read(0, 4) == b"\x2a" * 4 and buf.is_mapped
        buf.fill(0x17)
    for fd in fds:
        os.close(fd)
    sock.send(b"ok" if ok else b"no")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_export_message_between_processes(device, method):
    spec = "ipc:device=0"
    mr = memres.Resource(spec)
    buf = mr.allocate(1 << 16)
    assert not buf.is_mapped
    buf.fill(0x2A)
    data, fds = buf.export_message()
    assert isinstance(data, bytes) and fds
    parent, child = socket.socketpair()
    ctx = multiprocessing.get_context(method)
    p = ctx.Process(target=child_imports, args=(child, spec, 1 << 16))
    p.start()
    child.close()
    parent.settimeout(60)
    socket.send_fds(parent, [data], fds)
    for fd in fds:
        os.close(fd)
    answer = parent.recv(16)
    p.join(60)
    assert p.exitcode == 0
    if method == "fork":
        assert answer == b"forked"
    else:
        assert answer == b"ok"
        assert buf.read(0, 1) == b"\x17"
    buf.close()


def test_export_message_refused_for_host(host):
    buf = host.allocate(64)
    with pytest.raises(memres.Error) as info:
        buf.export_message()
    assert info.value.code == memres.ErrorCode.NOT_SUPPORTED
    with pytest.raises(memres.InvalidArgumentError):
        memres.import_message(b"garbage", [])
    with pytest.raises(TypeError):
        memres.import_message(b"garbage", 5)
    with pytest.raises(TypeError):
        memres.import_message(b"garbage", [], importer=5)
    buf.close()


def _never_runs(buf):
    raise AssertionError("a Buffer reached a child")


def test_pickle_and_copy_refused_clearly(host):
    # pickle's own "cannot pickle 'memres.Buffer' object" named no way out, and copy.copy()
    # said "pickle": both now name what to send instead, and the objects are untouched
    import copy
    import pickle

    buf = host.allocate(32)
    buf.fill(0x42)
    foreign = memres.Buffer.from_handle(buf.handle, 32)
    for obj, hint in ((buf, "export_message()"), (foreign, "export_message()"),
                      (host, "memres.Resource(mr.spec)")):
        for attempt in (pickle.dumps, lambda o: pickle.dumps(o, protocol=0), copy.copy,
                        copy.deepcopy):
            with pytest.raises(TypeError, match="cannot pickle or copy 'memres.%s'"
                               % type(obj).__name__) as info:
                attempt(obj)
            assert hint in str(info.value)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=_never_runs, args=(buf,))
    with pytest.raises(TypeError, match="cannot pickle or copy 'memres.Buffer'"):
        p.start()
    assert buf.read() == b"\x42" * 32 and not buf.closed and not host.closed
    foreign.close()
    buf.close()


def test_import_message_fd_past_an_int(device):
    # an fd past a C int was cut to one: fds=[fd + 2**32] imported the buffer through fd, another
    # file of the process as far as the caller said; now OutOfRangeError, nothing imported
    mr = memres.Resource("stats>ipc:device=0")
    buf = mr.allocate(1 << 16)
    buf.fill(0x2A)
    data, fds = buf.export_message()
    try:
        for bad in ([fds[0] + (1 << 32)] + fds[1:], [1 << 70] + fds[1:]):
            with pytest.raises(memres.OutOfRangeError, match=r"fds\[0\] is not a file descriptor"):
                memres.import_message(data, bad)
        with pytest.raises(TypeError):
            memres.import_message(data, ["5"])
        with memres.import_message(data, fds) as imported:  # the right fds still import
            assert imported.read(0, 4) == b"\x2a" * 4
    finally:
        for fd in fds:
            os.close(fd)
    buf.close()
    assert mr.stats()["n_buffers"] == 0


def test_forked_child_error_is_a_runtime_error(device):
    """The driver used in a child of fork() after the parent used it: memres.ForkedError, a
    memres.Error and a RuntimeError (torch raises RuntimeError there too), code FORKED. It was a
    plain memres.Error, which `except RuntimeError` did not catch."""
    device.allocate(64).close()  # the parent uses the driver
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        answer = b"none"
        try:
            memres.Resource("dmr:device=0")
        except RuntimeError as err:
            answer = ("%s %d %d" % (type(err).__name__, isinstance(err, memres.Error),
                                    err.code == memres.ErrorCode.FORKED)).encode()
        except BaseException as err:  # noqa: BLE001 (told to the parent)
            answer = type(err).__name__.encode()
        os.write(wfd, answer)
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as f:
        answer = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert answer == b"ForkedError 1 1"
    assert issubclass(memres.ForkedError, memres.Error)
