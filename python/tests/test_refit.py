"""The weight-refit channel (devipc.refit) with real processes on both emulated backends:
a thousand tensors (~256 MiB) to two consumers, byte-exact, over steps that reuse the
buckets; a consumer killed while it holds a bucket; a producer killed mid-step; bad input."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

import devipc
import devipc.refit
import refit_roles
from dataplane import reclaim_dead
from devipc.errors import InvalidArgumentError, PeerLostError, TimedOutError

MIB = 1 << 20


def _expect(outbox, tag, timeout=120):
    got = outbox.get(timeout=timeout)
    assert got[0] == tag, got
    return got


def test_a_thousand_tensors_reach_two_consumers_byte_exact_over_steps(kind, ctx, tmp_path):
    bucket = 32 * MIB
    lay = refit_roles.layout(seed=7, count=1000, total=256 * MIB, bucket_bytes=bucket)
    nbytes = sum(n * np.dtype(d).itemsize for _, d, n in lay)
    assert 240 * MIB < nbytes < 300 * MIB and len(lay) == 1000
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    outbox = ctx.Queue()
    steps = 3
    with devipc.refit.Producer(rt, path, consumers=2, bucket_bytes=bucket, buckets=2) as p:
        kids = [
            ctx.Process(target=refit_roles.consumer, args=(kind, path, lay, steps, outbox))
            for _ in range(2)
        ]
        for k in kids:
            k.start()
        p.accept(timeout=120)
        assert sorted(_expect(outbox, "connected")[1] for _ in kids) == [0, 1]
        fills_per_step = None
        done = 0
        for step in range(1, steps + 1):
            src = refit_roles.tensors(lay, step)
            before = p.fills
            assert p.send(src, timeout=120) == step
            fills_per_step = p.fills - before
            want = refit_roles.digest(src)
            got = []
            while len(got) < len(kids):
                m = outbox.get(timeout=120)
                if m[0] == "done":  # a consumer that finished its last step first
                    done += 1
                    continue
                assert m[0] == "step", m
                got.append(m[1:])
            assert sorted(got) == [(0, len(lay), want), (1, len(lay), want)]
            p.synchronize()
        # Every step needed more fills than there are buckets: the buckets were reused,
        # each only after both consumers acked it.
        assert fills_per_step >= 8 and p.fills == steps * fills_per_step
        for _ in range(len(kids) - done):
            _expect(outbox, "done")
        for k in kids:
            k.join(60)
            assert k.exitcode == 0
    rt.close()


def test_a_consumer_killed_holding_a_bucket_is_reported_and_the_other_goes_on(kind, ctx, tmp_path):
    lay = refit_roles.layout(seed=3, count=40, total=2 * MIB, bucket_bytes=256 * 1024)
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    outbox, doomed_box = ctx.Queue(), ctx.Queue()
    p = devipc.refit.Producer(rt, path, consumers=2, bucket_bytes=256 * 1024, buckets=2)
    accepting = threading.Thread(target=p.accept, kwargs={"timeout": 120})
    accepting.start()
    # The survivor connects first (consumer 0), the doomed one second (consumer 1).
    survivor = ctx.Process(target=refit_roles.consumer, args=(kind, path, lay, 2, outbox))
    survivor.start()
    deadline = time.monotonic() + 120
    while not p.consumers and time.monotonic() < deadline:
        time.sleep(0.02)
    doomed = ctx.Process(target=refit_roles.consumer, args=(kind, path, lay, 1, doomed_box, 2))
    doomed.start()
    accepting.join()
    assert len(p.consumers) == 2
    _expect(outbox, "connected")
    _expect(doomed_box, "connected")
    src = refit_roles.tensors(lay, 1)
    started = time.monotonic()
    with pytest.raises(PeerLostError) as lost:
        p.send(src, timeout=60)
    assert time.monotonic() - started < 30, "the producer took too long to notice"
    assert lost.value.kind == "peer_lost"
    assert lost.value.details["consumers"] == [1]
    assert lost.value.details["pids"] == [doomed.pid]
    with open(path + ".dying") as f:
        assert f.read() == "2 False"
    doomed.join(30)
    assert doomed.exitcode == -signal.SIGKILL
    # The survivor got the whole step, and gets the next one alone.
    assert _expect(outbox, "step")[1:] == (0, len(lay), refit_roles.digest(src))
    src2 = refit_roles.tensors(lay, 2)
    assert p.send(src2, timeout=60) == 2
    assert _expect(outbox, "step")[1:] == (0, len(lay), refit_roles.digest(src2))
    assert [c["lost"] for c in p.consumers] == [False, True]
    _expect(outbox, "done")
    survivor.join(60)
    assert survivor.exitcode == 0
    p.close()
    rt.close()
    reclaim_dead(kind, ctx)


def test_a_producer_killed_mid_step_is_reported_to_the_consumer(kind, ctx, tmp_path):
    lay = refit_roles.layout(seed=5, count=60, total=1 * MIB, bucket_bytes=1 << 16)
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    outbox, inbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=refit_roles.producer, args=(kind, path, lay, outbox, inbox))
    child.start()
    _expect(outbox, "listening")
    c = devipc.refit.Consumer(rt, path, timeout=120)
    into = {name: np.zeros(n, dtype) for name, dtype, n in lay}
    assert len(c.receive(into, timeout=60)) == len(lay)
    assert refit_roles.digest(into) == refit_roles.digest(refit_roles.tensors(lay, 1))
    _expect(outbox, "sent")
    inbox.put("go")
    started = time.monotonic()
    with pytest.raises(PeerLostError) as lost:
        for bucket in c.buckets(timeout=60):
            if bucket.step == 2 and child.exitcode is None:
                os.kill(child.pid, signal.SIGKILL)
                child.join(30)
    assert time.monotonic() - started < 30, "the consumer took too long to notice"
    assert lost.value.details["pid"] == child.pid
    assert child.exitcode == -signal.SIGKILL
    c.close()
    rt.close()
    reclaim_dead(kind, ctx)


def test_views_of_a_bucket_and_an_early_end_of_the_iteration(kind, ctx, tmp_path):
    """In-process producer and consumer (the channel does not care): whole tensors are
    viewed in place; a step whose iteration ends early is acked and skipped, and the next
    step arrives whole."""
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    p = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096, buckets=2)
    box = {}
    c = refit_roles.connect_one(p, rt, path)
    a = np.arange(100, dtype=np.float32)
    b = np.arange(3000, dtype=np.int16)  # 6000 bytes: split over two buckets
    p.send({"a": a, "b": b}, timeout=30)
    seen = []
    for bucket in c.buckets(timeout=30):
        for e in bucket.entries:
            if e.whole:
                bucket.stream.synchronize()
                seen.append((e.name, np.from_dlpack(bucket.view(e)).copy()))
            else:
                with pytest.raises(InvalidArgumentError, match="split"):
                    bucket.view(e)
                seen.append((e.name, e.start, e.nbytes))
    assert seen[0][0] == "a" and np.array_equal(seen[0][1], a)
    assert [s[0] for s in seen[1:]] == ["b", "b"] and sum(s[2] for s in seen[1:]) == 6000
    # A step abandoned after its first bucket, then a whole one.
    p.send({"a": a + 1, "b": b + 1}, timeout=30)
    for bucket in c.buckets(timeout=30):
        break
    into = {"a": np.zeros_like(a), "b": np.zeros_like(b)}
    # The producer reuses a bucket only after the consumer's ack: receive on a thread.
    r = threading.Thread(target=lambda: box.setdefault("names", c.receive(into, timeout=30)))
    r.start()
    p.send({"a": a + 2, "b": b + 2}, timeout=30)
    r.join()
    assert box["names"] == ["a", "b"]
    assert np.array_equal(into["a"], a + 2) and np.array_equal(into["b"], b + 2)
    c.close()
    p.close()
    rt.close()


def test_bad_input_is_a_typed_error(kind, tmp_path):
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    for bad in ({"buckets": 5}, {"buckets": 0}, {"bucket_bytes": 0}, {"consumers": 0}):
        args = {"consumers": 1, "bucket_bytes": 4096, **bad}
        with pytest.raises(InvalidArgumentError):
            devipc.refit.Producer(rt, path, **args)
    assert not os.path.exists(path)
    p = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096)
    with pytest.raises(InvalidArgumentError, match="accept"):
        p.send({"a": np.zeros(4)})
    with pytest.raises(InvalidArgumentError, match="listens"):
        devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096)
    c = refit_roles.connect_one(p, rt, path)
    with pytest.raises(InvalidArgumentError, match="not contiguous|C-contiguous"):
        p.send({"a": np.zeros((4, 4))[:, 1]})
    with pytest.raises(InvalidArgumentError, match="names are strings"):
        p.send([(1, np.zeros(4))])
    # A destination missing or of the wrong size: every bucket is still acked, the error
    # comes after the step, and the next step works.
    p.send({"a": np.ones(8, np.float32), "b": np.ones(4, np.float32)}, timeout=30)
    with pytest.raises(InvalidArgumentError, match="'a' is 32 bytes.*'b' has no destination"):
        c.receive({"a": np.zeros(4, np.float32)}, timeout=30)
    p.send({"a": np.full(8, 3, np.float32)}, timeout=30)
    out = np.zeros(8, np.float32)
    c.receive({"a": out}, timeout=30)
    assert (out == 3).all()
    with pytest.raises(TimedOutError):
        c.receive({"a": out}, timeout=0.3)
    c.close()
    with pytest.raises(PeerLostError):
        p.send({"a": out}, timeout=30)
    p.close()
    rt.close()


def test_a_consumer_refuses_what_is_not_a_refit_producer(kind, tmp_path):
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "fake.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)

    def fake():
        conn, _ = srv.accept()
        conn.sendall(b'{"v": 1, "index": 5, "consumers": 2, "buckets": 2, "bucket_bytes": 1, "share": "x"}\n')
        conn.recv(100)
        conn.close()

    t = threading.Thread(target=fake)
    t.start()
    with pytest.raises(InvalidArgumentError, match="not a devipc refit producer"):
        devipc.refit.Consumer(rt, path, timeout=10)
    t.join()
    srv.close()
    with pytest.raises(TimedOutError):
        devipc.refit.Consumer(rt, str(tmp_path / "nobody.sock"), timeout=0.3)
    rt.close()


def test_a_producer_killed_with_its_copies_queued_is_reported(kind, ctx, tmp_path):
    """The consumer waits for a fill whose copies never run (the producer's stream is held,
    then the producer is killed): PeerLostError, not a wait without end. (The consumer's
    stream keeps waiting for the dead producer's event, as a device would: the consumer
    runs in a process of its own, killed at the end.)"""
    path = str(tmp_path / "refit.sock")
    outbox, cbox, cin = ctx.Queue(), ctx.Queue(), ctx.Queue()
    producer = ctx.Process(target=refit_roles.producer_held, args=(kind, path, outbox))
    producer.start()
    _expect(outbox, "listening")
    consumer = ctx.Process(target=refit_roles.consumer_of_dead, args=(kind, path, cin, cbox))
    consumer.start()
    _expect(cbox, "connected")
    _expect(outbox, "sent")
    cin.put("receive")
    time.sleep(0.5)
    os.kill(producer.pid, signal.SIGKILL)
    producer.join(30)
    ended = _expect(cbox, "ended", timeout=30)
    assert ended[1:3] == ("PeerLostError", producer.pid), ended
    assert ended[3] < 30
    os.kill(consumer.pid, signal.SIGKILL)
    consumer.join(30)
    reclaim_dead(kind, ctx)


def test_a_step_the_producer_abandons_is_reported_not_delivered(kind, tmp_path):
    """A send that fails mid-step (here: it times out on a slow consumer) tells the
    consumers, whose iteration raises instead of ending as a whole step; the next step
    arrives whole."""
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    p = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096, buckets=1)
    box = {}
    c = refit_roles.connect_one(p, rt, path)

    def slow():
        try:
            for _ in c.buckets(timeout=30):
                time.sleep(1.0)
        except devipc.DevipcError as e:
            box["e"] = e

    r = threading.Thread(target=slow)
    r.start()
    parts = {f"t{i}": np.full(4096, i, np.uint8) for i in range(3)}  # three fills
    with pytest.raises(TimedOutError, match="did not acknowledge"):
        p.send(parts, timeout=0.5)
    r.join(30)
    assert isinstance(box.get("e"), InvalidArgumentError), box
    assert "abandoned step 1" in str(box["e"])
    into = {name: np.zeros(4096, np.uint8) for name in parts}
    r = threading.Thread(target=lambda: box.setdefault("names", c.receive(into, timeout=30)))
    r.start()
    assert p.send({k: v + 10 for k, v in parts.items()}, timeout=30) == 2
    r.join(30)
    assert box["names"] == list(parts)
    assert all((into[k] == parts[k] + 10).all() for k in parts)
    c.close()
    p.close()
    rt.close()


def test_misuse_is_refused_before_anything_is_sent(kind, tmp_path):
    rt = devipc.Runtime.emulated(kind)
    path = str(tmp_path / "refit.sock")
    with pytest.raises(InvalidArgumentError, match="device"):
        devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096, device="0")
    p = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096)
    for bad in (float("inf"), -1, "5", True):
        with pytest.raises(InvalidArgumentError, match="timeout"):
            p.accept(timeout=bad)
    box = {}
    c = refit_roles.connect_one(p, rt, path)
    with pytest.raises(InvalidArgumentError, match="named twice"):
        p.send([("w", np.zeros(4)), ("w", np.zeros(16))], timeout=5)
    with pytest.raises(InvalidArgumentError, match="pairs"):
        p.send([("w", np.zeros(4), 1)], timeout=5)
    with pytest.raises(InvalidArgumentError, match="cannot be read as bytes"):
        p.send({"t": np.array(["2026-11-29"], dtype="datetime64[D]")}, timeout=5)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        c.receive({}, timeout=float("nan"))
    # Nothing was sent: the channel still works.
    out = np.zeros(4, np.float32)
    r = threading.Thread(target=lambda: box.setdefault("names", c.receive({"w": out}, timeout=30)))
    r.start()
    p.send({"w": np.ones(4, np.float32)}, timeout=30)
    r.join(30)
    assert box["names"] == ["w"] and (out == 1).all()
    c.close()
    p.close()
    rt.close()
