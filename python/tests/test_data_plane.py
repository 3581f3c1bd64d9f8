"""The stream-ordered data plane from Python, on both emulated backends: copies, batches,
reads and writes through streams (byte-exact), requests (dropping an unfinished one
returns at once), events ordering two streams, a stream shared by threads, CopyError,
signals on streams, and the DLPack stream handshake."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

import devipc
from dataplane import Gate, pattern, until_in_flight
from devipc.errors import CopyError, InvalidArgumentError, TimedOutError


def test_copies_batches_reads_and_writes_are_byte_exact(kind):
    rt = devipc.Runtime.emulated(kind)
    # Multiples of 2 MiB: the emulated Ascend allocates whole 2 MiB pages.
    n = 2 << 20
    src, dst = rt.allocate(n), rt.allocate(n)
    assert len(src) == len(dst) == n
    stream = rt.create_stream()
    data = pattern(n, 7)
    w = stream.write(src, data)
    assert (w.kind, w.nbytes) == ("write", n)
    assert w.result(timeout=10) is None
    assert src.read() == data
    # A whole buffer, then sub-spans (method and slice forms, negative offsets too).
    stream.copy(dst, src).wait(timeout=10)
    assert dst.read() == data
    stream.write(dst, bytes(n)).wait(timeout=10)
    stream.copy(dst.span(1000, 5000), src.span(2000, 6000)).wait(timeout=10)
    assert dst.read(1000, 4000) == data[2000:6000]
    assert dst.read(0, 1000) == bytes(1000) and dst.read(5000) == bytes(n - 5000)
    span = src.span()
    assert len(span) == n and span.nbytes == n and span.ptr == src.ptr and span.device == 0
    tail = span[-4096:]
    assert (len(tail), tail.ptr) == (4096, src.ptr + n - 4096)
    r = stream.read(tail[16:32])
    assert (r.kind, r.nbytes) == ("read", 16)
    assert r.result(timeout=10) == data[n - 4096 + 16 : n - 4096 + 32]
    assert r.result() == r.result(), "the bytes stay with the request"
    # A batch: 16 blocks in reversed order, one request for all; any buffer-protocol
    # source for writes.
    block = n // 16
    batch = stream.copy_batch(
        [(dst.span((15 - i) * block, (16 - i) * block), src.span(i * block, (i + 1) * block)) for i in range(16)]
    )
    assert (batch.kind, batch.nbytes) == ("copy", n)
    batch.wait(timeout=10)
    assert batch.is_complete()
    got = dst.read()
    for i in range(16):
        assert got[(15 - i) * block : (16 - i) * block] == data[i * block : (i + 1) * block], i
    stream.write(dst.span(0, 16), np.arange(4, dtype=np.uint32)).wait(timeout=10)
    assert np.frombuffer(dst.read(0, 16), np.uint32).tolist() == [0, 1, 2, 3]
    # Through an import (a view of this process's own export).
    imported = rt.import_buffer(src.export(any_process=True))
    assert stream.read(imported.span(100, 200)).result(timeout=10) == data[100:200]
    imported.close()
    stream.synchronize()
    src.close()
    dst.close()


def test_spans_and_copies_refuse_bad_arguments(kind):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    n = len(buf)
    stream = rt.create_stream()
    for start, stop in ((0, n + 1), (10, 5), (n + 1, None)):
        with pytest.raises(InvalidArgumentError):
            buf.span(start, stop)
    span = buf.span(100, 200)
    with pytest.raises(InvalidArgumentError):
        span.span(0, 101)
    with pytest.raises(InvalidArgumentError):
        span[::2]
    with pytest.raises(InvalidArgumentError):
        span[3]
    with pytest.raises(InvalidArgumentError):
        stream.copy(object(), buf)
    with pytest.raises(InvalidArgumentError, match="lengths must match"):
        stream.write(span, b"x" * 99)
    with pytest.raises(InvalidArgumentError):
        stream.write(span, object())
    # Memory of the other vendor's runtime is refused by the stream.
    other = devipc.Runtime.emulated("hip" if kind == "ascend" else "ascend")
    foreign = other.allocate(4096)
    with pytest.raises(CopyError, match="same vendor runtime") as info:
        stream.copy(buf, foreign)
    assert isinstance(info.value.__cause__, InvalidArgumentError)
    # A stream given as an integer: negative is refused; the raw value of a live stream
    # wraps it (the caller vouches for it).
    with pytest.raises(InvalidArgumentError):
        devipc.Stream.wrap(rt, -5)
    wrapped = devipc.Stream.wrap(rt, stream.raw)
    assert (wrapped.raw, wrapped.device) == (stream.raw, 0)
    wrapped.write(buf.span(0, 3), b"abc").wait(timeout=10)
    assert buf.read(0, 3) == b"abc"
    # A closed buffer cannot be named; a span made before keeps the memory usable.
    span = buf.span(0, 3)
    buf.close()
    with pytest.raises(devipc.errors.ClosedError):
        stream.read(buf)
    assert stream.read(span).result(timeout=10) == b"abc"
    del span, wrapped
    foreign.close()


def test_a_refused_batch_pair_is_a_copy_error_with_its_index(kind):
    rt = devipc.Runtime.emulated(kind)
    src, dst = rt.allocate(4096), rt.allocate(4096)
    src.write(pattern(4096, 1))
    stream = rt.create_stream()
    pairs = [(dst.span(i * 64, (i + 1) * 64), src.span(i * 64, (i + 1) * 64)) for i in range(3)]
    with pytest.raises(CopyError) as info:
        stream.copy_batch(pairs + [(dst.span(0, 10), src.span(0, 11))])
    e = info.value
    assert (e.index, e.count, e.kind) == (3, 4, "copy")
    assert (e.details["index"], e.details["count"]) == (3, 4)
    assert isinstance(e.__cause__, InvalidArgumentError)
    assert isinstance(e, devipc.DevipcError)
    # A pair Python cannot take apart, or that names no memory, is refused the same way.
    with pytest.raises(CopyError) as info:
        stream.copy_batch(pairs[:1] + ["not a pair"])
    assert (info.value.index, info.value.count) == (1, 2)
    with pytest.raises(CopyError) as info:
        stream.copy_batch([(dst, src), (dst, object()), (dst, src)])
    assert (info.value.index, info.value.count) == (1, 3)
    assert isinstance(info.value.__cause__, InvalidArgumentError)
    # devipc checks every pair before it enqueues any: a refused batch copied nothing.
    stream.synchronize()
    assert dst.read(0, 64) == bytes(64)
    # An empty batch completes at once.
    stream.copy_batch([]).wait(timeout=10)
    src.close()
    dst.close()


def test_dropping_an_unfinished_request_returns_at_once(kind):
    rt = devipc.Runtime.emulated(kind)
    n = 2 << 20
    src, dst = rt.allocate(n), rt.allocate(n)
    stream = rt.create_stream()
    probe = rt.create_event()

    def attempt() -> bool:
        seed = random.randrange(256)
        src.write(pattern(n, seed))
        with Gate(rt, stream):
            request = stream.copy(dst, src)
            if request.is_complete():
                return False
            started = time.perf_counter()
            del request
            dropped = time.perf_counter() - started
            # Had the drop waited for the copy, the stream would be idle now.
            probe.record(stream)
            held = not probe.is_complete()
        probe.wait(timeout=60)
        # The copy still ran, and its memory stayed until it had.
        assert dst.read() == pattern(n, seed)
        if held:
            assert dropped < 0.02, dropped
        return held

    until_in_flight(attempt)
    src.close()
    dst.close()


def test_an_event_orders_two_streams(kind):
    rt = devipc.Runtime.emulated(kind)
    n = 4 << 20
    a, b, c = rt.allocate(n), rt.allocate(n), rt.allocate(n)
    first, second = rt.create_stream(), rt.create_stream()
    event = rt.create_event()
    assert event.device == 0 and event.is_complete(), "never recorded: complete"

    def attempt() -> bool:
        seed = random.randrange(256)
        a.write(pattern(n, seed))
        with Gate(rt, first):
            ab = first.copy(b, a)
            event.record(first)
            second.wait_event(event)
            bc = second.copy(c, b)
            held = not event.is_complete() and not bc.is_complete()
        bc.wait(timeout=60)
        assert ab.is_complete() and event.is_complete()
        event.wait(timeout=10)
        assert c.read() == pattern(n, seed), "the second copy ran after the first"
        return held

    until_in_flight(attempt)
    # Stream.record is Event.record; an event of another device is refused.
    first.record(event)
    if rt.device_count() > 1:
        other = rt.create_event(1)
        with pytest.raises(InvalidArgumentError):
            first.record(other)
    for buf in (a, b, c):
        buf.close()


def test_a_stream_serves_several_threads(kind):
    rt = devipc.Runtime.emulated(kind)
    threads, part, rounds = 4, 64 << 10, 8
    n = threads * rounds * part
    device = 1 if rt.device_count() > 1 else 0
    src, dst = rt.allocate(n, device), rt.allocate(n, device)
    src.write(pattern(n, 5))
    stream = rt.create_stream(device)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for r in range(rounds):
                at = (t * rounds + r) * part
                request = stream.copy(dst.span(at, at + part), src.span(at, at + part))
                if r % 2:
                    request.wait(timeout=30)
                # Every other request is dropped unfinished: the drainer completes it.
            back = stream.read(dst.span(t * rounds * part, t * rounds * part + 64)).result(timeout=30)
            assert back == pattern(n, 5)[t * rounds * part : t * rounds * part + 64]
        except BaseException as e:  # noqa: BLE001 - asserted below
            errors.append(e)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(60)
    assert errors == []
    stream.synchronize()
    assert dst.read() == pattern(n, 5)
    src.close()
    dst.close()


def test_a_signal_orders_streams(kind):
    rt = devipc.Runtime.emulated(kind)
    n = 4 << 20
    a, b, c = rt.allocate(n), rt.allocate(n), rt.allocate(n)
    first, second = rt.create_stream(), rt.create_stream()
    signal = rt.create_signal()

    # The host wait lasts until the notifier's stream reached the notify (Ascend's notify
    # record runs in stream order; HIP before 7.0 blocks the host in the stream wait), so
    # it runs on a thread while the notifier's stream is held, and must not return
    # before the gate opens.
    a.write(pattern(n, 11))
    gate = Gate(rt, first)
    ab = first.copy(b, a)
    signal.notify(stream=first)
    waited = threading.Event()

    def waiter():
        signal.wait(timeout=30, stream=second)
        waited.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not waited.wait(0.2), "the wait returned before the notifier's stream ran"
    gate.close()
    thread.join(60)
    assert waited.is_set()
    bc = second.copy(c, b)
    bc.wait(timeout=60)
    ab.wait(timeout=60)
    assert c.read() == pattern(n, 11), "the waiting stream ran after the notifier's copy"
    # Refused: a stream of the other vendor's runtime, or of another device.
    other = devipc.Runtime.emulated("hip" if kind == "ascend" else "ascend")
    with pytest.raises(InvalidArgumentError, match="same vendor runtime"):
        signal.notify(stream=other.create_stream())
    if rt.device_count() > 1:
        with pytest.raises(InvalidArgumentError):
            signal.wait(timeout=0, stream=rt.create_stream(1))
    with pytest.raises(TimedOutError):
        signal.wait(timeout=0.05, stream=second)
    signal.close()
    for buf in (a, b, c):
        buf.close()


def test_dlpack_refuses_a_stream_for_the_emulators_host_memory(kind):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(64)
    view = buf.view("uint8", [64])
    for bad in (0, -1, 5, "x"):
        with pytest.raises(InvalidArgumentError, match="must be None"):
            buf.__dlpack__(stream=bad)
        with pytest.raises(InvalidArgumentError, match="must be None"):
            view.__dlpack__(stream=bad)
    capsule = buf.__dlpack__(stream=None)
    del capsule, view
    buf.close()


def test_dlpack_stream_values_for_device_memory(kind):
    # The device path (kDLROCM), run on the emulator's memory through the test hook.
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(64)
    stream = rt.create_stream()
    stream.write(buf, bytes(len(buf))).wait(timeout=10)
    handshake = devipc._devipc._dlpack_handshake
    for good in (None, 0, -1, stream.raw):
        handshake(buf, good, as_device=True)
    for bad in (1, 2, -2, True, 1.5, "7", object()):
        with pytest.raises(InvalidArgumentError):
            handshake(buf, bad, as_device=True)
    buf.close()


def test_dlpack_orders_pending_copies_before_the_host_consumer(kind):
    rt = devipc.Runtime.emulated(kind)
    buf, staged = rt.allocate(1 << 16), rt.allocate(1 << 16)
    n = len(buf)
    stream = rt.create_stream()

    def attempt() -> bool:
        seed = random.randrange(256)
        staged.write(pattern(n, seed))
        gate = Gate(rt, stream)
        copy = stream.copy(buf, staged)
        held = not copy.is_complete()
        # numpy passes no stream: the producer waits for its copies before exporting,
        # so the export waits for the gate.
        seen: list[bytes] = []
        exporter = threading.Thread(target=lambda: seen.append(bytes(np.from_dlpack(buf))))
        exporter.start()
        exporter.join(0.2)
        waited = exporter.is_alive()
        gate.close()
        exporter.join(60)
        assert copy.is_complete()
        assert seen == [pattern(n, seed)]
        return held and waited

    until_in_flight(attempt)
    buf.close()
    staged.close()


def test_dlpack_orders_pending_copies_before_the_consumers_stream(kind):
    rt = devipc.Runtime.emulated(kind)
    buf, staged = rt.allocate(1 << 16), rt.allocate(1 << 16)
    n = len(buf)
    producer, consumer = rt.create_stream(), rt.create_stream()
    default = devipc.Stream.wrap(rt, 0)
    for theirs, value in ((consumer, consumer.raw), (default, None)):

        def attempt() -> bool:
            seed = random.randrange(256)
            staged.write(pattern(n, seed))
            with Gate(rt, producer):
                copy = producer.copy(buf, staged)
                devipc._devipc._dlpack_handshake(buf, value, as_device=True)
                # The host did not wait: the consumer's stream does.
                read = theirs.read(buf)
                held = not copy.is_complete() and not read.is_complete()
            assert read.result(timeout=60) == pattern(n, seed)
            return held

        until_in_flight(attempt)
    # Once the producer's work is done, the handshake forgets its stream and orders
    # nothing.
    devipc._devipc._dlpack_handshake(buf, consumer.raw, as_device=True)
    buf.close()
    staged.close()
