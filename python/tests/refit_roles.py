"""What the child processes of the refit tests run (top-level functions for ``spawn``).
Each reports to the parent through ``outbox``; a failure as ``("error", name, text)``."""

from __future__ import annotations

import hashlib
import os
import signal
import traceback

import numpy as np

import devipc
import devipc.refit


def layout(seed: int, count: int, total: int, bucket_bytes: int) -> list[tuple[str, str, int]]:
    """`count` tensors of about `total` bytes in all: (name, dtype, elements) each, with a
    0-byte one, a one-element one and one larger than a bucket (split across buckets)."""
    rng = np.random.default_rng(seed)
    dtypes = ["float32", "float16", "int64", "uint8", "int8"]
    sizes = rng.integers(1, 2 * total // count, count).astype(np.int64)
    sizes[0], sizes[1], sizes[2] = 0, 1, bucket_bytes + bucket_bytes // 3
    sizes = sizes * total // max(int(sizes.sum()), 1)
    sizes[2] = bucket_bytes + bucket_bytes // 3
    out = []
    for i, n in enumerate(sizes):
        dtype = dtypes[i % len(dtypes)]
        item = np.dtype(dtype).itemsize
        out.append((f"layer{i}.weight", dtype, int(n) // item))
    return out


def tensors(lay, step: int) -> dict[str, np.ndarray]:
    """The producer's tensors of `step`: bytes that differ per step and per tensor."""
    out = {}
    for i, (name, dtype, n) in enumerate(lay):
        nbytes = n * np.dtype(dtype).itemsize
        raw = (np.arange(nbytes, dtype=np.uint64) * 2654435761 + step * 97 + i * 131) >> 7
        out[name] = raw.astype(np.uint8).view(dtype)
    return out


def digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode())
        h.update(arrays[name].tobytes())
    return h.hexdigest()


def _report(outbox, fn, *args):
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which asserts
        outbox.put(("error", type(e).__name__, f"{e}\n{traceback.format_exc()}"))


def consumer(kind, path, lay, steps, outbox, die_at_fill=None):
    """Receives `steps` steps into numpy arrays and reports each one's digest; with
    `die_at_fill`, kills itself (SIGKILL) while it holds that fill, unacked (and writes
    ``"<fill> <acked>"`` to `path` + ``".dying"`` first)."""
    _report(outbox, _consumer, kind, path, lay, steps, outbox, die_at_fill)


def _consumer(kind, path, lay, steps, outbox, die_at_fill):
    rt = devipc.Runtime.emulated(kind)
    c = devipc.refit.Consumer(rt, path, timeout=120)
    outbox.put(("connected", c.index, os.getpid()))
    into = {name: np.zeros(n, dtype) for name, dtype, n in lay}
    for _ in range(steps):
        if die_at_fill is not None:
            for bucket in c.buckets(timeout=120):
                if bucket.fill == die_at_fill:
                    # A file, not the queue: its feeder thread would die with the process.
                    with open(path + ".dying", "w") as f:
                        f.write(f"{bucket.fill} {bucket.acked}")
                    os.kill(os.getpid(), signal.SIGKILL)
        names = c.receive(into, timeout=120)
        outbox.put(("step", c.index, len(names), digest(into)))
    c.close()
    rt.close()
    outbox.put(("done", c.index))


def producer(kind, path, lay, outbox, inbox):
    """Serves one consumer at `path`; sends step 1 whole, then starts step 2 and waits
    (blocked on the consumer's acks) to be killed."""
    _report(outbox, _producer, kind, path, lay, outbox, inbox)


def _producer(kind, path, lay, outbox, inbox):
    rt = devipc.Runtime.emulated(kind)
    p = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=1 << 16, buckets=2)
    outbox.put(("listening", os.getpid()))
    p.accept(timeout=120)
    p.send(tensors(lay, 1), timeout=120)
    outbox.put(("sent", 1))
    inbox.get(timeout=120)
    p.send(tensors(lay, 2), timeout=120)
    outbox.put(("sent", 2))


def producer_held(kind, path, outbox):
    """Serves one consumer, then sends a step whose copies (and fill) wait on a stream held
    busy, as behind a long kernel, and waits to be killed with them queued."""
    _report(outbox, _producer_held, kind, path, outbox)


def _producer_held(kind, path, outbox):
    from devipc.testing import hold_stream

    rt = devipc.Runtime.emulated(kind)
    p = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=4096, buckets=2)
    outbox.put(("listening", os.getpid()))
    p.accept(timeout=120)
    stream = rt.create_stream()
    hold_stream(stream)
    p.send({"a": np.arange(4096, dtype=np.uint8)}, stream=stream, timeout=60)
    outbox.put(("sent", 1))
    signal.pause()


def consumer_of_dead(kind, path, inbox, outbox):
    """Connects, receives a step when told to (its producer is killed meanwhile) and
    reports how that ended; then waits to be killed (its stream still waits for the dead
    producer's fill, which never completes)."""
    _report(outbox, _consumer_of_dead, kind, path, inbox, outbox)


def _consumer_of_dead(kind, path, inbox, outbox):
    import time

    rt = devipc.Runtime.emulated(kind)
    c = devipc.refit.Consumer(rt, path, timeout=120)
    outbox.put(("connected", c.index))
    inbox.get(timeout=120)
    started = time.monotonic()
    try:
        c.receive({"a": np.zeros(4096, np.uint8)})  # no timeout: only the death ends it
        outbox.put(("received",))
    except devipc.DevipcError as e:
        outbox.put(("ended", type(e).__name__, e.details.get("pid"), time.monotonic() - started))
    signal.pause()


def connect_one(producer, rt, path):
    """Connects a consumer of `producer` (at `path`) in this process: the consumer's set-up
    runs on a thread while the producer accepts it."""
    import threading

    box = {}
    t = threading.Thread(target=lambda: box.setdefault("c", devipc.refit.Consumer(rt, path, timeout=30)))
    t.start()
    producer.accept(timeout=30)
    t.join()
    return box["c"]
