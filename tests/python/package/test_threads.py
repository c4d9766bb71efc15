"""Threads sharing resources: allocate, transfer and close from several at once."""
import threading

import memres


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
