"""P11: one weight-refit step of 1,000 tensors from a producer to a consumer process,
through ``devipc.refit`` (persistent buckets, stream-ordered fill and ack) against the
same tensors shared one token per tensor and rebuilt every step (``devipc.torch.share``
+ ``devipc.torch.rebuild``, today's per-tensor path), measured in one run on the
emulated backends.

Both sides' tensors are torch tensors in the framework's device memory (on the emulator:
CPU tensors over ``devipc.testing.framework_malloc`` blocks, one block per tensor, as a
per-tensor IPC handle needs). A step ends when the consumer has the new weights in its
own tensors:

- per-tensor tokens: the producer exports every tensor (``export_external``) and sends the
  descriptor; the consumer imports every tensor, copies each into its weight
  (``Tensor.copy_``), drops the imports and answers; the producer ends the exports
  (``close_external``, as it must before the framework frees or reuses the memory);
- refit: ``Producer.send`` (copies into the buckets, notifies) and ``Consumer.receive``
  (waits, copies out, acks); the consumer answers when its copies completed.

The figure is the median step time over ``--steps`` steps after one warm-up step each.

    python python/bench/refit.py [--kind ascend|hip|both] [--n 1000] [--total-mib 256]
                                 [--bucket-mib 32] [--steps 5]
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time


def framework_tensors(rt, n: int, each: int):
    """`n` float32 tensors of `each` bytes, one framework block each; and the blocks."""
    import torch

    from devipc.testing import framework_malloc

    blocks, tensors = [], []
    for _ in range(n):
        nbytes = (each + 4095) // 4096 * 4096
        ptr = framework_malloc(rt, nbytes)
        blocks.append(ptr)
        raw = (ctypes.c_char * nbytes).from_address(ptr)
        tensors.append(torch.frombuffer(raw, dtype=torch.float32)[: each // 4])
    return tensors, blocks


def consumer(kind, n, each, path, inbox, outbox):
    import devipc
    import devipc.refit
    import devipc.torch
    from devipc.testing import framework_free

    rt = devipc.Runtime.emulated(kind)
    weights, blocks = framework_tensors(rt, n, each)
    outbox.put(rt.process_id)
    c = devipc.refit.Consumer(rt, path, timeout=120)
    into = {f"w{i}": w for i, w in enumerate(weights)}
    while True:
        msg = inbox.get()
        if msg == "stop":
            break
        if msg == "refit":
            c.receive(into, timeout=120)
        else:
            views = devipc.torch.rebuild(rt, msg)
            for w, v in zip(weights, views):
                w.copy_(v)
            del views, v
        outbox.put(float(weights[-1][0]))
    c.close()
    del into, weights
    for ptr in blocks:
        framework_free(rt, ptr)
    rt.close()
    outbox.put("stopped")


def run(kind: str, n: int, total: int, bucket: int, steps: int) -> tuple[float, float, int]:
    import devipc
    import devipc.refit
    import devipc.torch
    from devipc.testing import framework_free

    each = total // n // 4 * 4
    ctx = mp.get_context("spawn")
    rt = devipc.Runtime.emulated(kind)
    tensors, blocks = framework_tensors(rt, n, each)
    path = os.path.join(os.environ["DEVIPC_RUNTIME_DIR"], f"p11-{kind}.sock")
    producer = devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=bucket, buckets=2)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=consumer, args=(kind, n, each, path, inbox, outbox))
    child.start()
    peer = outbox.get(timeout=120)
    producer.accept(timeout=120)
    named = {f"w{i}": t for i, t in enumerate(tensors)}

    def per_tensor(step: int) -> float:
        for t in tensors:
            t[0] = step
        t0 = time.perf_counter()
        desc = devipc.torch.share(rt, tensors, peers=[peer])
        inbox.put(desc)
        got = outbox.get(timeout=300)
        devipc.torch.close_external(rt, tensors)
        elapsed = time.perf_counter() - t0
        assert got == step, (got, step)
        return elapsed

    def refit(step: int) -> float:
        for t in tensors:
            t[0] = step
        t0 = time.perf_counter()
        inbox.put("refit")
        producer.send(named, timeout=300)
        got = outbox.get(timeout=300)
        elapsed = time.perf_counter() - t0
        assert got == step, (got, step)
        return elapsed

    base, chan = [], []
    for step in range(steps + 1):
        b, r = per_tensor(2 * step + 1), refit(2 * step + 2)
        if step:  # the first step of each warms up
            base.append(b)
            chan.append(r)
    fills = producer.fills
    inbox.put("stop")
    assert outbox.get(timeout=120) == "stopped"
    child.join(60)
    producer.close()
    del named, tensors
    for ptr in blocks:
        framework_free(rt, ptr)
    rt.close()
    return statistics.median(base), statistics.median(chan), fills // (steps + 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=["ascend", "hip", "both"], default="both")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--total-mib", type=int, default=256)
    ap.add_argument("--bucket-mib", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="devipc-bench-")
    os.environ["DEVIPC_EMU_DIR"] = os.path.join(root, "emu")
    os.environ["DEVIPC_RUNTIME_DIR"] = os.path.join(root, "run")
    for d in (os.environ["DEVIPC_EMU_DIR"], os.environ["DEVIPC_RUNTIME_DIR"]):
        os.mkdir(d, 0o700)
    try:
        kinds = ["ascend", "hip"] if args.kind == "both" else [args.kind]
        for kind in kinds:
            base, chan, fills = run(kind, args.n, args.total_mib << 20, args.bucket_mib << 20, args.steps)
            print(
                f"P11 {kind}: refit step of {args.n} tensors ({args.total_mib} MiB): "
                f"{args.n} tokens + rebuild {base * 1e3:.1f} ms, "
                f"refit channel ({fills} fills of {args.bucket_mib} MiB, 2 buckets) {chan * 1e3:.1f} ms: "
                f"ratio {base / chan:.2f}x (goal >= 4x)"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
