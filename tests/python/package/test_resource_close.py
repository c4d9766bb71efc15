"""Resource.close() and the with block: the object's reference dropped, the stack finalized once
nothing else holds it, every later call refused with ClosedError."""
import gc
import threading

import pytest

import memres


def test_with_block_closes(host):
    with memres.Resource("cache>host") as mr:
        assert not mr.closed
        buf = mr.allocate(100)
        buf.write(b"abc")
        buf.close()
    assert mr.closed
    assert repr(mr) == "<memres.Resource closed>"


def test_with_block_closes_on_exception():
    with pytest.raises(KeyError):
        with memres.Resource("host") as mr:
            raise KeyError("x")
    assert mr.closed


def test_exit_takes_the_three_arguments():
    """Resource.__exit__ takes exactly the three the with statement passes, as Buffer.__exit__
    does: it took any number (mr.__exit__() and mr.__exit__(1, 2, 3, 4) closed the resource);
    TypeError otherwise, the resource left open."""
    mr = memres.Resource("host")
    for args in ((), (None,), (None, None), (None, None, None, None)):
        with pytest.raises(TypeError, match="__exit__\\(\\) takes 3 arguments \\(%d given\\)" % len(args)):
            mr.__exit__(*args)
        assert not mr.closed
    with pytest.raises(TypeError):
        mr.__exit__(None, None, tb=None)
    assert not mr.closed
    assert mr.__exit__(None, None, None) is False and mr.closed
    assert mr.__exit__(KeyError, KeyError("x"), None) is False  # closing again: nothing


def test_closed_resource_equals_itself_alone():
    # a closed Resource compared by the address of a stack it no longer holds: each new stack
    # made at that address was == to it (991 times in 999 create-close rounds) and one set
    # element with it
    cache = memres.Resource("cache>host")
    up1, up2 = cache.upstream, cache.upstream
    assert up1 is not up2 and up1 == up2 and hash(up1) == hash(up2)  # open: one stack
    prev, equal = None, 0
    for _ in range(200):
        mr = memres.Resource("host")
        if prev is not None:
            assert not prev.closed or prev != mr
            equal += prev == mr
            assert len({prev, mr}) == 2
        mr.close()
        prev = mr
    assert equal == 0
    h = hash(up1)
    up1.close()
    assert up1 == up1 and hash(up1) == h and up1 != up2 and not up2.closed
    cache.close()
    up2.close()


def test_close_twice_and_calls_after():
    mr = memres.Resource("limit:max=1MiB>host")
    h = hash(mr)
    mr.close()
    mr.close()
    assert mr.closed and hash(mr) == h and mr == mr
    calls = [
        lambda: mr.allocate(8),
        lambda: mr.allocate(8, None),
        lambda: mr.allocate(size=8),
        mr.stats,
        mr.counters,
        mr.reset_stats,
        mr.trim,
        mr.snapshot,
        mr.oom_snapshot,
        mr.tags,
        lambda: mr.tag_counts("a"),
        lambda: mr.reset_tag_peak("a"),
        lambda: mr.is_asleep("a"),
        lambda: mr.wake("a"),
        lambda: mr.sleep("a"),
        mr.__enter__,
        lambda: mr.upstream,
        lambda: mr.spec,
        lambda: mr.kind,
        lambda: mr.device_id,
        lambda: mr.flags,
        lambda: mr.is_host_accessible,
        lambda: mr.is_device_accessible,
        lambda: memres.import_message(b"", [], mr),
    ]
    for call in calls:
        with pytest.raises(memres.ClosedError) as info:
            call()
        assert isinstance(info.value, ValueError)
        assert info.value.domain == "memres-error-quark"
        assert info.value.code == memres.ErrorCode.CLOSED
        assert "Resource is closed" in str(info.value)


def test_buffer_outlives_closed_resource():
    mr = memres.Resource("cache>host")
    buf = mr.allocate(4096)
    buf.fill(0x5A)
    mr.close()
    gc.collect()
    # the buffer holds the stack: its memory, its resource and a close through the cache
    assert buf.read(0, 4) == b"\x5a" * 4
    # the object that made it, closed (cuda.core's Buffer.memory_resource is its resource)
    assert buf.memory_resource is mr
    buf.close()
    assert buf.memory_resource is None


def test_other_objects_of_a_stack_stay_open():
    mr = memres.Resource("cache>host")
    buf = mr.allocate(4096)
    up = mr.upstream
    mr.close()
    assert buf.memory_resource is mr and mr.closed
    # the upstream object holds the layer below, not the closed top
    assert not up.closed and up.kind == "host"
    assert up.stats()["used_current"] == 2 << 20  # the cache's chunk
    buf.close()
    small = up.allocate(16)
    assert small.memory_resource is up
    small.close()


def test_buffer_objects_at_exit_with_their_resource_dropped(tmp_path):
    """An open buffer and its memory_resource alive at interpreter exit, the Resource that made
    them gone: the exit finalized the stack twice (a double free) when memory_resource took a
    new reference of a stack whose last reference had gone."""
    import subprocess
    import sys
    code = ("import memres\n"
            "buf = memres.Resource('host').allocate(4096)\n"
            "o = buf.memory_resource\n"
            "mr = memres.Resource('cache>host')\n"
            "b2 = mr.allocate(4096)\n"
            "del mr\n"
            "o2 = b2.memory_resource\n"
            "b3 = o2.allocate(64)\n"
            "print(o.kind, o2.kind, b3.size)\n")
    for seed in range(4):
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=dict(__import__("os").environ, PYTHONHASHSEED=str(seed)))
        assert run.returncode == 0, run.stderr
        assert run.stdout == "host cache 64\n"


def test_host_resource_of_a_sleep_closed():
    mr = memres.Resource("host")
    host = memres.Resource("host")
    host.close()
    with pytest.raises(memres.ClosedError):
        mr.sleep("t", mode="backup", host=host)


def test_close_finalizes_the_stack_on_the_fake(device, fake_counts):
    before = fake_counts()["pools"]
    mr = memres.Resource("cache>dmr:device=0,pool=new")
    assert fake_counts()["pools"] == before + 1
    buf = mr.allocate(1 << 20)
    mr.close()
    # the buffer holds it: the pool lives
    assert fake_counts()["pools"] == before + 1
    buf.close()
    del buf
    gc.collect()
    assert fake_counts()["pools"] == before
    del device


def test_close_while_other_threads_use_it():
    """close() on one thread while others allocate, trim and take snapshots: each call either
    works or raises ClosedError, nothing else, and the buffers made stay usable."""
    for _ in range(20):
        mr = memres.Resource("cache:chunk=64KiB>host")
        start = threading.Barrier(4)
        outcomes, bufs, errors = [], [], []

        def worker(i):
            start.wait()
            for _ in range(200):
                try:
                    if i == 0:
                        bufs.append(mr.allocate(64))
                    elif i == 1:
                        mr.trim()
                    else:
                        mr.snapshot()
                    outcomes.append("ok")
                except memres.ClosedError:
                    outcomes.append("closed")
                except BaseException as e:  # pragma: no cover - the failure reported below
                    errors.append(e)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        start.wait()
        mr.close()
        for t in threads:
            t.join()
        assert errors == []
        assert len(outcomes) == 600
        assert set(outcomes) <= {"ok", "closed"}
        for b in bufs:
            b.write(b"x")
            assert b.read(0, 1) == b"x"
            b.close()
