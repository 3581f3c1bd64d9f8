"""Rebuild cost per tensor: 1,000 array views of one allocation shared through one token
(one descriptor entry per allocation) against the same 1,000 views shared through 1,000
separate tokens (one export per view), measured in one run on the emulated backends.

The consumer (a spawned process) rebuilds each descriptor with ``devipc.arrays.rebuild``
(``numpy.from_dlpack`` over typed views) ``--reps`` times and reports the median; the
time covers parsing the tokens, the imports (the first one maps the memory, later ones
of the same allocation are served by the live import) and making every array.

    python python/bench/rebuild.py [--kind ascend|hip|both] [--n 1000] [--reps 7]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time


def consumer(kind, reps, inbox, outbox):
    import devipc
    import devipc.arrays

    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    results = {}
    for name, desc in inbox.get():
        times, imports = [], []
        for _ in range(reps):
            before = rt.vendor_imports()
            t0 = time.perf_counter()
            arrays = devipc.arrays.rebuild(rt, desc)
            times.append(time.perf_counter() - t0)
            imports.append(rt.vendor_imports() - before)
            del arrays
        results[name] = (statistics.median(times), max(imports))
    outbox.put(results)


def run(kind: str, n: int, reps: int) -> tuple[float, float]:
    import numpy as np

    import devipc
    import devipc.arrays
    from devipc.tensors import Descriptor, TensorSpec

    ctx = mp.get_context("spawn")
    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=consumer, args=(kind, reps, inbox, outbox))
    child.start()
    peer = outbox.get()
    buf = rt.allocate(n * 64 * 4)
    whole = np.from_dlpack(buf.view("float32", [n, 8, 8]))
    views = [whole[k] for k in range(n)]
    one = devipc.arrays.share(views, [buf], peers=[peer])
    tokens = []
    for k in range(n):
        t = buf.export(offset=k * 256, size=256)
        buf.grant(t, [peer])
        tokens.append(t)
    separate = Descriptor(
        tuple(tokens),
        tuple(TensorSpec(k, "float32", (8, 8), (8, 1), 0) for k in range(n)),
    )
    inbox.put([("one token", one), (f"{n} tokens", separate)])
    results = outbox.get()
    child.join()
    del whole, views
    buf.close()
    (t1, i1), (tn, i_n) = results["one token"], results[f"{n} tokens"]
    print(
        f"{kind:>6}: one token {t1 / n * 1e6:7.2f} us/tensor ({t1 * 1e3:6.1f} ms, "
        f"{i1} vendor import) | {n} tokens {tn / n * 1e6:7.2f} us/tensor "
        f"({tn * 1e3:6.1f} ms, {i_n} vendor import) | ratio {tn / t1:5.2f}x"
    )
    return t1, tn


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", default="both", choices=["ascend", "hip", "both"])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    # Private emulator and runtime directories, unless the caller chose them.
    made = []
    for var in ("DEVIPC_EMU_DIR", "DEVIPC_RUNTIME_DIR"):
        if var not in os.environ:
            os.environ[var] = tempfile.mkdtemp(prefix="devipc-bench-")
            made.append(os.environ[var])
    kinds = ["ascend", "hip"] if args.kind == "both" else [args.kind]
    print(f"rebuild of {args.n} float32 8x8 views, median of {args.reps}")
    try:
        for kind in kinds:
            run(kind, args.n, args.reps)
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
