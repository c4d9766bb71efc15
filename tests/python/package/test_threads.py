"""Threads sharing resources: allocate, transfer and close from several at once."""
import os
import sysconfig
import threading
import time

import pytest

import memres
from fakestream import FakeStreamHold


def hammer(mr, n, errors):
    try:
        for i in range(n):
            with mr.allocate(64 + i % 512) as buf:
                buf.fill(i & 0xFF)
                assert buf.read(0, 1) == bytes([i & 0xFF])
    except Exception as err:  # noqa: BLE001 (reported by the main thread)
        errors.append(err)


def run_threads(mr, n_threads=8, n=2000):
    errors = []
    threads = [threading.Thread(target=hammer, args=(mr, n, errors)) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_threads_host():
    mr = memres.Resource("stats>host")
    run_threads(mr)
    assert mr.stats()["n_buffers"] == 0


def test_threads_device(device):
    mr = memres.Resource("stats>cache>dmr:device=0")
    run_threads(mr)
    assert mr.stats()["n_buffers"] == 0


def test_buffer_closed_in_another_thread(host):
    bufs = [host.allocate(32) for _ in range(100)]
    t = threading.Thread(target=lambda: [b.close() for b in bufs])
    t.start()
    t.join()
    assert all(b.closed for b in bufs)


def test_close_while_another_thread_reads():
    # read(), fill() and copies release the GIL; a close() on another thread meanwhile freed the
    # memory under them (a segmentation fault). Now the close is refused with BufferError while
    # they run, and each transfer either sees the whole buffer or raises ClosedError.
    mr = memres.Resource("host")
    size = 32 << 20
    refused = 0
    for _ in range(20):
        buf = mr.allocate(size)
        buf.fill(0x11)
        started = threading.Event()
        result = []

        def reader():
            started.set()
            try:
                data = buf.read()
                result.append(len(data) == size and data.count(0x11) == size)
            except memres.ClosedError as err:
                result.append(err.code == memres.ErrorCode.CLOSED)

        t = threading.Thread(target=reader)
        t.start()
        started.wait()
        try:
            buf.close()
        except BufferError as err:
            assert "call(s) on other threads are using it" in str(err)
            refused += 1
        t.join()
        assert result == [True]
        buf.close()
        assert buf.closed
    print("closes refused during a read:", refused)


def test_state_word_build():
    # python-package-atomic runs these tests on the module built as a free-threaded Python
    # builds it (the state word's compare-and-swap); the other runs on the plain one
    expect = os.environ.get("MEMRES_PY_EXPECT_ATOMIC") == "1"
    assert memres._memres._atomic_state == (1 if expect else 0) or sysconfig.get_config_var(
        "Py_GIL_DISABLED")


def test_busy_count_under_contention():
    # The count of users behind BufferError (views and calls that release the GIL) and the
    # close that checks it are one state word: a user begins only while no close has begun, a
    # close begins only while there is no user (a compare-and-swap on a free-threaded build).
    # Threads read, fill, copy and take memoryviews of shared buffers while others close them:
    # every transfer sees its whole buffer or raises ClosedError, every refused close raises
    # BufferError, and once the users are gone the count is back to zero (the close succeeds).
    mr = memres.Resource("stats>host")
    size = 1 << 16
    for _ in range(3):
        bufs = [mr.allocate(size) for _ in range(4)]
        for b in bufs:
            b.fill(0x5A)
        spare = mr.allocate(size)
        stop = threading.Event()
        errors, refused, closed = [], [0], [0]

        def user(k):
            try:
                i = 0
                while not stop.is_set():
                    b = bufs[(k + i) % len(bufs)]
                    i += 1
                    try:
                        if i % 4 == 0:
                            data = b.read()
                            assert len(data) == size and data.count(0x5A) == size
                        elif i % 4 == 1:
                            b.fill(0x5A)
                        elif i % 4 == 2:
                            b.copy_to(spare)
                        else:
                            with memoryview(b) as view:
                                assert view[0] == 0x5A and view[size - 1] == 0x5A
                    except memres.ClosedError as err:
                        assert err.code == memres.ErrorCode.CLOSED
                        if all(x.closed for x in bufs):
                            return
            except Exception as err:  # noqa: BLE001 (reported by the main thread)
                errors.append(err)

        def closer():
            try:
                pending = list(bufs)
                for _ in range(400):  # while the users run; the rest after they stop
                    if not pending:
                        return
                    b = pending.pop(0)
                    try:
                        b.close()
                        closed[0] += 1
                    except BufferError as err:
                        assert "memoryview" in str(err) or "other threads" in str(err), err
                        refused[0] += 1
                        pending.append(b)
                        time.sleep(0.0005)
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        users = [threading.Thread(target=user, args=(k,)) for k in range(3)]
        for t in users:
            t.start()
        c = threading.Thread(target=closer)
        c.start()
        c.join(120)
        stop.set()
        for t in users:
            t.join(120)
        for b in bufs:  # no user left: the count is back to zero
            if not b.closed:
                b.close()
                closed[0] += 1
        assert errors == []
        assert closed[0] == len(bufs) and all(b.closed for b in bufs)
        spare.close()
        assert mr.stats()["n_buffers"] == 0


def test_allocate_while_another_thread_closes_the_resource():
    """Threads allocate from a Resource while another closes it: each allocate gives a buffer of
    the stack (its size, memory_resource the object) or raises ClosedError, never a buffer of a
    freed stack. On a free-threaded CPython the allocation read the object's resource without a
    reference, which the close could drop, the stack's last, under it; the module now takes one
    there (resource.c; the atomic build runs that path under the GIL)."""
    for _ in range(20):
        mr = memres.Resource("stats>host")
        start = threading.Barrier(5)
        results = [[] for _ in range(4)]

        def allocate(out):
            start.wait()
            for i in range(200):
                try:
                    out.append(mr.allocate(64 + i))
                except memres.ClosedError:
                    out.append(None)

        threads = [threading.Thread(target=allocate, args=(out,)) for out in results]
        for t in threads:
            t.start()
        start.wait()
        mr.close()
        for t in threads:
            t.join()
        for out in results:
            assert len(out) == 200
            for i, buf in enumerate(out):
                if buf is not None:
                    assert buf.size == 64 + i and buf.memory_resource is mr
                    buf.fill(i & 0xFF)
                    assert buf.read(0, 1) == bytes([i & 0xFF])
                    buf.close()
            # once the close was seen, every later allocate raised
            first_closed = out.index(None) if None in out else len(out)
            assert all(buf is None for buf in out[first_closed:])
        assert mr.closed


def test_reads_while_another_thread_closes_the_resource():
    """Threads call the methods and getters that keep the GIL (stats, reset_stats, oom_snapshot,
    the getters, repr, the tag methods, is_asleep) while another closes the Resource, with no
    buffer open, so that the close drops the stack's last reference: each call gives the
    stack's real values or raises ClosedError (repr: the closed form), and once a thread saw
    the close every later call raised. On a free-threaded CPython these calls read the object's
    resource without a reference, which the close could free under them; they now take one
    there (pymemres_resource_hold(), pymemres.h; the atomic build runs that path under the
    GIL, where the race itself cannot happen)."""
    probe = memres.Resource("stats>host")
    spec, flags, text = probe.spec, probe.flags, repr(probe)
    assert spec.startswith("stats>host") and text == f"<memres.Resource {spec}>"
    calls = {
        "stats": lambda mr: mr.stats()["n_buffers"] == 0 and mr.stats()["used_current"] == 0,
        "reset_stats": lambda mr: mr.reset_stats() is None,
        "oom_snapshot": lambda mr: mr.oom_snapshot() is None,
        "spec": lambda mr: mr.spec == spec,
        "kind": lambda mr: mr.kind == "stats",
        "device_id": lambda mr: mr.device_id == -1,
        "accessible": lambda mr: mr.is_host_accessible and not mr.is_device_accessible,
        "flags": lambda mr: mr.flags == flags and not mr.is_managed,
        "upstream": lambda mr: mr.upstream.kind == "host",
        # reset_stats() forgets the tag's counts: its one buffer of 100 bytes, or nothing
        "tags": lambda mr: mr.tags() in (["py-ftref"], []),
        "tag_counts": lambda mr: tag_counts(mr.tag_counts("py-ftref")),
        "reset_tag_peak": lambda mr: mr.reset_tag_peak("py-ftref") is None,
        "is_asleep": lambda mr: mr.is_asleep("py-ftref") is False,
        "repr": lambda mr: repr(mr) == text or (repr(mr) == "<memres.Resource closed>" and None),
    }
    names = list(calls)

    def tag_counts(c):
        return c["bytes_current"] == c["count_current"] == 0 and (
            (c["bytes_total"], c["count_total"]) in ((100, 1), (0, 0))
        )

    def call(mr, name):
        try:
            return calls[name](mr)
        except memres.ClosedError:
            return None

    for _ in range(10):
        mr = memres.Resource("stats>host")
        with memres.tag("py-ftref"):
            mr.allocate(100).close()
        results = [[] for _ in range(4)]

        def read(out):
            # rounds of calls until one saw the close, then a round more
            while not out or out[-1][1] is not None:
                for name in names:
                    out.append((name, call(mr, name)))
            for name in names:
                out.append((name, call(mr, name)))

        threads = [threading.Thread(target=read, args=(out,)) for out in results]
        for t in threads:
            t.start()
        # the close once every thread made a round of calls on the open Resource
        while any(len(out) < 2 * len(names) for out in results):
            time.sleep(0.0005)
        mr.close()
        for t in threads:
            t.join()
        for out in results:
            first_closed = next(i for i, (_, ok) in enumerate(out) if ok is None)
            assert first_closed >= 2 * len(names)
            # each call before the close gave the stack's real values
            assert [call for call in out[:first_closed] if call[1] is not True] == []
            # once the close was seen, every later call raised (repr: the closed form)
            assert all(ok is None for _, ok in out[first_closed:]), out[first_closed:]
            assert {name for name, _ in out[first_closed:]} == set(names)
        assert mr.closed


def test_close_refused_while_in_use_then_allowed(host):
    buf = host.allocate(64)
    views = [memoryview(buf) for _ in range(3)]
    with pytest.raises(BufferError) as info:
        buf.close()
    assert "3 memoryview(s)" in str(info.value)
    for v in views:
        v.release()
    with pytest.raises(BufferError):
        with buf:
            view = memoryview(buf)  # noqa: F841 (held across the close of the with block)
    del view
    buf.close()
    assert buf.closed
    buf.close()  # closing twice does nothing
    with pytest.raises(memres.ClosedError):
        memoryview(buf)
    with pytest.raises(memres.ClosedError):
        buf.fill(0)


def test_close_refused_while_dlpack_waits(device, fake_counts):
    # __dlpack__ on device memory waits for the buffer's stream with the GIL released; a close()
    # on another thread meanwhile went through: for a buffer exported before, it dropped the
    # object's reference, the last one, and the export went on with the freed buffer (here a
    # ClosedError read from freed memory). close() is refused meanwhile now (BufferError, as
    # during a copy), and the export gives its capsule.
    mr = memres.Resource("stats>dmr:device=0")
    before = fake_counts()
    hold = FakeStreamHold()
    try:
        buf = mr.allocate(4096, stream=hold.stream.value)
        buf.fill(0x2B)
        buf.__dlpack__(max_version=(1, 0))  # exported once, its tensor dropped at once
        hold.hold()
        out = {}

        def consumer():
            try:
                out["capsule"] = buf.__dlpack__(max_version=(1, 0))
            except Exception as err:  # noqa: BLE001 (checked below)
                out["error"] = err

        count = hold.lib.fakecuda_call_count
        count.restype = hold.ct.c_long
        syncs = count(b"cuStreamSynchronize") + count(b"cuCtxSynchronize")
        t = threading.Thread(target=consumer)
        t.start()
        # the consumer waits in the driver's synchronize (entered: counted) for the held stream
        deadline = time.monotonic() + 30
        while (count(b"cuStreamSynchronize") + count(b"cuCtxSynchronize") == syncs
               and time.monotonic() < deadline):
            time.sleep(0.005)
        time.sleep(0.05)
        assert t.is_alive() and out == {}
        with pytest.raises(BufferError, match="1 call.s. on other threads are using it"):
            buf.close()
        hold.release()
        t.join(30)
        assert not buf.closed
        assert "error" not in out
        imported = memres.from_dlpack(out.pop("capsule"))  # the small consumer: memres itself
        assert imported.handle == buf.handle and imported.read(0, 4) == b"\x2b" * 4
        imported.close()
        buf.close()
        assert buf.closed and mr.stats()["n_buffers"] == 0
    finally:
        hold.close()
    after = fake_counts()
    assert after["streams"] == before["streams"] and after["pool_allocations"] == before["pool_allocations"]
