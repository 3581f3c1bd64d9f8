"""Signals with generations from Python, on both emulated backends: a wait for a
generation orders a stream's copy after the write posted before it (the producer's
stream held, so the copy provably waits), each generation is its own across two real
processes, a post a ring ahead of the waits times out, and a consumer killed with
``kill -9`` leaves the producer's posts with a timeout, never a hang."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import devipc
import devipc.testing
import roles
from dataplane import pattern, reclaim_dead

N = 256 << 10


def test_a_wait_for_orders_the_copy_after_the_posted_write(kind):
    rt = devipc.Runtime.emulated(kind)
    sig = rt.create_signal()
    peer_view = rt.import_signal(sig.export(any_process=True))
    shared, local = rt.allocate(N), rt.allocate(N)
    producer, consumer = rt.create_stream(), rt.create_stream()
    devipc.testing.hold_stream(producer)
    write = producer.write(shared.span(0, N), pattern(N, 5))
    assert sig.post(producer, timeout=10) == 1
    copies = []

    def consume():
        # A runtime whose IPC-event stream wait blocks the host (HIP before 7.0) returns
        # once the held write ran.
        peer_view.wait_for(consumer, 1, timeout=10)
        copies.append(consumer.copy(local.span(0, N), shared.span(0, N)))

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.3)
    if copies:
        assert not copies[0].is_complete(), f"{kind}: the copy ran before the held write"
    devipc.testing.release_stream(producer)
    t.join(20)
    assert copies, f"{kind}: the wait never returned"
    copies[0].wait(20)
    write.wait(20)
    assert local.read(0, N) == pattern(N, 5)
    assert sig.generations == (1, 1) == peer_view.generations
    assert devipc.testing.wait_for_drained(10)


def test_each_generation_is_its_own_across_processes_and_posts_wait_a_ring_back(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    sig = rt.create_signal()
    shared = rt.allocate(N)
    stream = rt.create_stream()
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.generation_consumer, args=(kind, inbox, outbox))
    child.start()
    try:
        assert isinstance(outbox.get(timeout=60), int)
        # Two posts before any wait: a binary semaphore would collapse them.
        for g in (1, 2):
            shared_write = stream.write(shared.span(0, N), pattern(N, g))
            assert sig.post(stream, timeout=10) == g
        shared_write.wait(20)
        inbox.put((sig.export(any_process=True), shared.export(any_process=True), N))
        got = outbox.get(timeout=60)
        assert got[0] == "waited", got
        _, early, data = got
        assert early == "TimedOutError", "generation 3 was never posted"
        assert data == pattern(N, 2), "the copy after generation 2 sees its write"
        assert sig.generations == (2, 2)
        # Waits were issued up to 2: posts 3..6 go, 7 would take 3's slot first.
        for g in range(3, 7):
            assert sig.post(stream, timeout=10) == g
        with pytest.raises(devipc.errors.TimedOutError):
            sig.post(stream, timeout=0.2)
        # The consumer dies with kill -9: the posts a ring ahead still time out.
        os.kill(child.pid, signal.SIGKILL)
        child.join(20)
        started = time.monotonic()
        with pytest.raises(devipc.errors.TimedOutError):
            sig.post(stream, timeout=0.3)
        assert time.monotonic() - started < 5
        sig.close()
        shared.close()
        reclaim_dead(kind, ctx)
    finally:
        if child.is_alive():
            child.kill()
            child.join()
