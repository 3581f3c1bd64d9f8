"""P12: a 256 MiB tensor from one Ray actor to another on one node, through Ray's default
object-store path against devipc's Ray Direct Transport (``devipc.ray``), measured in one
run on the emulator.

The producer actor holds one tensor (``devipc.torch.empty``: a ``cpu`` tensor in emulated
device memory) and returns it from two methods: one plain (Ray pickles it into its object
store), one marked ``tensor_transport="DEVIPC"``. The consumer actor times, per round,
``ray.get`` of a fresh call to the producer until it holds the tensor: (a) through the
object store, (b) through DEVIPC as a zero-copy view, (c) through DEVIPC copied into a
target buffer (``ray.experimental.set_target_for_ref``, a devipc buffer of the consumer's).
Each round ends with the reference dropped (Ray frees the object). An empty call to the
producer (no tensor) is timed the same way, as the floor of Ray's own task overhead. The medians of
``--rounds`` rounds (after one warm-up) and the ratios (a)/(b), (a)/(c) are printed; with
``--touch`` the consumer also reads every byte it received (a sum) inside the timing,
which is what a zero-copy receive defers to its first use.

    python python/bench/ray_transport.py [--mib 256] [--rounds 7] [--touch]

``DEVIPC_BACKEND`` chooses the backend (default ``emulated-hip``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time


def actors():
    import ray
    import torch

    @ray.remote(enable_tensor_transport=True)
    class Producer:
        def __init__(self, mib):
            import devipc.ray
            import devipc.torch

            n = mib << 20
            self.t = devipc.torch.empty(devipc.ray.runtime(), (n // 4,), torch.float32)
            self.t.copy_(torch.arange(n // 4, dtype=torch.float32))

        def nothing(self):
            return None

        def plain(self):
            return self.t

        def direct(self):
            return self.t

        def close(self):
            import devipc.ray

            deadline = time.monotonic() + 30
            while devipc.ray.live_exports() and time.monotonic() < deadline:
                time.sleep(0.02)
            del self.t
            return devipc.ray.shutdown()

    @ray.remote(enable_tensor_transport=True)
    class Consumer:
        def __init__(self, mib):
            import devipc.ray
            import devipc.torch

            n = mib << 20
            self.target = devipc.torch.empty(devipc.ray.runtime(), (n // 4,), torch.float32)
            self.n = n // 4

        def round(self, producer, mode, touch):
            """Seconds from the call to the producer until the tensor is held (and, with
            ``touch``, summed); checks a few elements."""
            import devipc.ray

            devipc.ray.register()  # this actor names the transport itself (see the README)
            t0 = time.perf_counter()
            if mode == "empty call":
                ray.get(producer.nothing.remote())
                return time.perf_counter() - t0
            if mode == "object store":
                ref = producer.plain.remote()
            else:
                ref = producer.direct.options(tensor_transport="DEVIPC").remote()
                if mode == "DEVIPC into a target buffer":
                    ray.experimental.set_target_for_ref(ref, [self.target])
            t = ray.get(ref)
            if touch:
                float(t.sum())
            elapsed = time.perf_counter() - t0
            if mode == "DEVIPC into a target buffer" and t is not self.target:
                raise AssertionError("the target buffer was not used")
            last = float(torch.tensor(self.n - 1, dtype=torch.float32))
            if (float(t[0]), float(t[12345]), float(t[-1])) != (0.0, 12345.0, last):
                raise AssertionError(f"wrong contents through {mode}")
            del t, ref
            return elapsed

        def close(self):
            import devipc.ray

            del self.target
            return devipc.ray.shutdown()

    return Producer, Consumer


MODES = ["object store", "DEVIPC zero-copy", "DEVIPC into a target buffer"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--touch", action="store_true", help="also read every byte received, inside the timing")
    args = p.parse_args()
    os.environ.setdefault("DEVIPC_BACKEND", "emulated-hip")
    made = []
    for var in ("DEVIPC_EMU_DIR", "DEVIPC_RUNTIME_DIR"):
        if var not in os.environ:
            os.environ[var] = tempfile.mkdtemp(prefix="devipc-bench-")
            made.append(os.environ[var])
    # Two tensors of --mib on device 0 (the producer's and the consumer's target).
    os.environ.setdefault("DEVIPC_EMU_MEM_LIMIT", str(max(4 * args.mib << 20, 1 << 30)))

    import ray

    import devipc.ray

    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        devipc.ray.register()
        Producer, Consumer = actors()
        producer, consumer = Producer.remote(args.mib), Consumer.remote(args.mib)
        times = {m: [] for m in ["empty call", *MODES]}
        for r in range(args.rounds + 1):
            for mode in times:
                took = ray.get(consumer.round.remote(producer, mode, args.touch))
                if r:  # round 0 warms up
                    times[mode].append(took)
        left = ray.get([consumer.close.remote(), producer.close.remote()])
        med = {m: statistics.median(v) for m, v in times.items()}
        touch = ", every byte read" if args.touch else ""
        print(
            f"P12: {args.mib} MiB float32 tensor, actor to actor on one node "
            f"({os.environ['DEVIPC_BACKEND']}{touch}), median of {args.rounds} rounds"
        )
        for i, m in enumerate(times):
            lo, hi = min(times[m]), max(times[m])
            label = f"({'abc'[i - 1]})" if i else "   "
            print(f"  {label} {m:<28} {med[m] * 1e3:9.2f} ms  [{lo * 1e3:.2f} - {hi * 1e3:.2f}]")
        a, b, c = (med[m] for m in MODES)
        print(f"  ratio (a)/(b) object store / DEVIPC zero-copy:          {a / b:7.1f}x (goal >= 10x)")
        print(f"  ratio (a)/(c) object store / DEVIPC into a target buffer: {a / c:7.1f}x")
        if any(left):
            print(f"  left exported at shutdown: {left}")
    finally:
        ray.shutdown()
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
