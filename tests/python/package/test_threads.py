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
