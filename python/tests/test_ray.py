"""``devipc.ray``, the Ray Direct Transport over devipc: two actors on one node pass torch
tensors through it (single tensors, lists, views with offsets, 0-byte tensors), the
receiver as zero-copy views or copies into target buffers; a dropped object reference
releases the sender's export (after the receiver dropped its view); a receiver on another
node is refused with Ray's cross-node transports named; an abort ends a receive in
progress; and the README's example runs as written.

One Ray instance serves the module (``num_cpus=2``). The actors of a test take
``DEVIPC_BACKEND=emulated-<kind>`` from their ``runtime_env``; each ends with a graceful
``close`` (the transport's ``shutdown``, which closes its runtime, then its memory) before
it is killed, so that nothing is left behind. Needs ray and torch (skips loudly without
them)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

import pytest

import devipc
from conftest import loud_skip

try:
    import ray
    import torch

    MISSING = None
except Exception as e:  # noqa: BLE001 - any failure to import means "not usable here"
    MISSING = f"ray or torch does not import here ({type(e).__name__}: {str(e)[:120]}); pip install 'ray>=2.60' torch"

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"
PAGE = 4096  # Ascend exports framework blocks by IPC key, in whole pages


def _need(test: str) -> None:
    if MISSING is not None:
        loud_skip(test, MISSING)


@pytest.fixture(scope="module")
def cluster():
    """One Ray instance for the module, with the transport registered."""
    if MISSING is not None:
        yield None
        return
    import devipc.ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    devipc.ray.register()
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


_CLASSES: dict[str, type] = {}


def _actors():
    """The actor classes, made once torch and ray are known to import (defined here, not
    at module level, so that Ray ships them by value to its workers)."""
    if _CLASSES:
        return _CLASSES["Sender"], _CLASSES["Receiver"]

    @ray.remote(enable_tensor_transport=True, max_concurrency=4)
    class Sender:
        """Holds tensors in devipc buffers (``devipc.torch.empty``) and in framework
        blocks (``devipc.testing.framework_malloc``) and returns them through DEVIPC."""

        def __init__(self):
            import devipc.ray

            self.rt = devipc.ray.runtime()
            self.blocks = []
            self.tensors = {}

        def pid(self):
            return os.getpid()

        def make(self, name, memory, nbytes, seed, dtype="uint8", device=0):
            """A tensor of ``nbytes`` bytes filled with ``pattern(nbytes, seed)`` (a devipc
            buffer's on ``device``)."""
            import ctypes

            import devipc.testing
            import devipc.torch

            if memory == "buffer":
                t = devipc.torch.empty(self.rt, (nbytes,), torch.uint8, device=device)
            else:
                size = max((nbytes + PAGE - 1) // PAGE * PAGE, PAGE)
                ptr = devipc.testing.framework_malloc(self.rt, size)
                self.blocks.append(ptr)
                block = (ctypes.c_char * size).from_address(ptr)
                t = torch.frombuffer(block, dtype=torch.uint8)[:nbytes]
            # pattern(nbytes, seed), spelled out: a module-level function named here would be
            # pickled by reference, and Ray then starts the actor without its runtime_env.
            fill = bytes((i * 31 + seed) & 0xFF for i in range(nbytes))
            t.copy_(torch.frombuffer(bytearray(fill), dtype=torch.uint8))
            self.tensors[name] = t.view(getattr(torch, dtype))
            return t.data_ptr()

        def derive(self, views):
            """Views of held tensors, in order: ``(name, source, how)``, ``how`` evaluated
            with ``t`` bound to the source."""
            for name, source, how in views:
                self.tensors[name] = eval(how, {"t": self.tensors[source], "torch": torch})

        def send(self, names):
            """Returns the named tensors (one, or a list): called with DEVIPC."""
            return self.tensors[names] if isinstance(names, str) else [self.tensors[n] for n in names]

        def exports(self):
            import devipc.ray

            blocks = [self.rt.external_block(p) is not None for p in self.blocks]
            return devipc.ray.live_exports(), devipc.ray.pending_exports(), blocks

        def doctored(self, name, **changes):
            """The transport's metadata for a tensor, with fields changed (a receive the
            test drives by hand); the export lives until ``forget``."""
            import devipc.ray

            meta = devipc.ray.DevipcTransport().extract_tensor_transport_metadata("doctored", [self.tensors[name]])
            if "generation" in changes:
                changes["generation"] = meta.generation + changes["generation"]
            return dataclasses.replace(meta, **changes)

        def forget(self, obj_id):
            import devipc.ray

            devipc.ray.DevipcTransport().garbage_collect(obj_id, None, [])

        def close(self):
            """Waits until Ray freed every object sent, ends the transport (exports,
            signals, runtime), then frees the framework blocks."""
            import gc

            import devipc.ray
            import devipc.testing

            deadline = time.monotonic() + 20
            while devipc.ray.live_exports() and time.monotonic() < deadline:
                time.sleep(0.02)
            live = devipc.ray.live_exports()
            self.tensors.clear()
            gc.collect()
            stuck = devipc.ray.shutdown()
            for ptr in self.blocks:
                devipc.testing.framework_free(self.rt, ptr)
            self.blocks = []
            self.rt = None
            gc.collect()
            return live, stuck

    @ray.remote(enable_tensor_transport=True, max_concurrency=4)
    class Receiver:
        """Receives DEVIPC objects (as task arguments, or by ``ray.get``) and reports
        what arrived."""

        def __init__(self):
            self.kept = []

        @staticmethod
        def _describe(ts):
            return [
                (bytes(t.contiguous().view(torch.uint8).reshape(-1).numpy()) if t.numel() else b"",
                 tuple(t.shape), t.stride(), str(t.dtype), t.device.type)
                for t in ts
            ]

        def take(self, x, keep=False):
            """What arrived: (bytes, shape, strides, dtype, device) per tensor, and the
            imports open while the tensors live."""
            import devipc.ray

            ts = x if isinstance(x, list) else [x]
            if keep:
                self.kept.append(x)
            return self._describe(ts), devipc.ray.runtime().live_imports()

        def take_into(self, sender, names, targets):
            """Asks ``sender`` for ``names`` through DEVIPC and ``ray.get``s them into target
            buffers: plain ``cpu`` tensors (``"host"``) or ``devipc.torch.empty`` ones
            (``"buffer"``), one per tensor."""
            import devipc.ray
            import devipc.torch

            # This actor names the transport itself: Ray registers it here asynchronously
            # after the actor started, so make sure it is known.
            devipc.ray.register()
            ref = sender.send.options(tensor_transport="DEVIPC").remote(names)
            rt = devipc.ray.runtime()
            made = []
            for shape, dtype, memory in targets:
                if memory == "buffer":
                    made.append(devipc.torch.empty(rt, shape, dtype))
                else:
                    made.append(torch.full(shape, 7, dtype=getattr(torch, dtype)))
            ray.experimental.set_target_for_ref(ref, made)
            got = ray.get(ref)
            got = got if isinstance(got, list) else [got]
            same = [g is m for g, m in zip(got, made)]
            return self._describe(got), same, rt.live_imports()

        def drop(self):
            import gc

            self.kept.clear()
            gc.collect()

        def live_imports(self):
            import devipc.ray

            return devipc.ray.runtime().live_imports()

        def recv_and_abort(self, meta):
            """Starts a receive of ``meta`` (whose generation is never posted, so it waits),
            aborts it from here, and reports how it ended and the imports left."""
            import devipc.ray

            transport = devipc.ray.DevipcTransport()
            transport.abort_transport("nothing-under-way", None)  # a no-op
            rt = devipc.ray.runtime()
            before = rt.live_imports()
            outcome = []

            def receive():
                try:
                    transport.recv_multiple_tensors("doctored", meta, devipc.ray.DevipcCommunicatorMetadata())
                    outcome.append(("returned",))
                except Exception as e:  # noqa: BLE001 - reported to the test
                    outcome.append((type(e).__name__, str(e)))

            thread = threading.Thread(target=receive)
            thread.start()
            deadline = time.monotonic() + 20
            while rt.live_imports() == before and time.monotonic() < deadline:
                time.sleep(0.01)
            during = rt.live_imports() - before
            time.sleep(0.1)  # into the wait for the generation
            t0 = time.monotonic()
            transport.abort_transport("doctored", None)
            thread.join(30)
            return outcome, during, rt.live_imports() - before, time.monotonic() - t0

        def close(self):
            import gc

            import devipc.ray

            self.kept.clear()
            gc.collect()
            return devipc.ray.shutdown()

    _CLASSES.update(Sender=Sender, Receiver=Receiver)
    return Sender, Receiver


class Pair:
    """A sender and a receiver actor of ``kind``; closed gracefully (receiver first) and
    killed on leaving the ``with`` block."""

    def __init__(self, kind: str, receiver_env: dict | None = None):
        Sender, Receiver = _actors()
        env = {"DEVIPC_BACKEND": f"emulated-{kind}"}
        self.sender = Sender.options(runtime_env={"env_vars": env}).remote()
        self.receiver = Receiver.options(runtime_env={"env_vars": {**env, **(receiver_env or {})}}).remote()

    def __enter__(self) -> "Pair":
        return self

    def close(self):
        stuck_receiver = ray.get(self.receiver.close.remote(), timeout=60)
        live, stuck_sender = ray.get(self.sender.close.remote(), timeout=60)
        return stuck_receiver, live, stuck_sender

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:  # a failed test: close what can be closed, quietly
            try:
                self.close()
            except Exception:  # noqa: BLE001 - the test's own failure is what matters
                pass
        for actor in (self.receiver, self.sender):
            ray.kill(actor)


def send(pair: Pair, names):
    return pair.sender.send.options(tensor_transport="DEVIPC").remote(names)


def test_tensors_cross_between_two_actors(kind, cluster):
    """Single tensors, a list over two allocations of each kind of memory, views with
    offsets (slices, a transposed view, a narrowed column) of one storage and 0-byte
    tensors arrive byte-exact, with their strides and offsets, one vendor import per
    allocation."""
    _need(f"test_tensors_cross_between_two_actors[{kind}]")
    with Pair(kind) as pair:
        ray.get([
            pair.sender.make.remote("buf", "buffer", 4096, 1, "float32"),
            pair.sender.make.remote("fw", "framework", 3 * PAGE, 2, "int32"),
            pair.sender.make.remote("odd", "framework", 1000, 3),
        ])
        ray.get(pair.sender.derive.remote([
            ("grid", "buf", "t.view(32, 32)"),
            ("rows", "grid", "t[3:9]"),
            ("tr", "grid", "t[5:, 7:20].t()"),
            ("col", "grid", "t[:, 11]"),
            ("tail", "fw", "t[1000:]"),
            ("zero", "fw", "t[5:5]"),
            ("nothing", "buf", "torch.empty(0, 4)"),
        ]))
        buf, fw = pattern(4096, 1), pattern(3 * PAGE, 2)
        grid = torch.frombuffer(bytearray(buf), dtype=torch.float32).view(32, 32)

        def raw(t):
            return bytes(t.contiguous().view(torch.uint8).reshape(-1).numpy())

        # One tensor.
        got, imports = ray.get(pair.receiver.take.remote(send(pair, "buf")))
        assert got == [(buf, (1024,), (1,), "torch.float32", "cpu")]
        assert imports == 1
        # Views of one storage, at offsets: one allocation, one import.
        names = ["rows", "tr", "col", "grid"]
        got, imports = ray.get(pair.receiver.take.remote(send(pair, names)))
        want = [grid[3:9], grid[5:, 7:20].t(), grid[:, 11], grid]
        assert [g[0] for g in got] == [raw(w) for w in want]
        assert [(g[1], g[2]) for g in got] == [(tuple(w.shape), w.stride()) for w in want]
        assert imports == 1
        # A list over a devipc buffer and two framework blocks, with 0-byte tensors.
        names = ["buf", "tail", "zero", "odd", "nothing", "fw"]
        got, imports = ray.get(pair.receiver.take.remote(send(pair, names)))
        fw_ints = torch.frombuffer(bytearray(fw), dtype=torch.int32)
        assert [g[0] for g in got] == [buf, raw(fw_ints[1000:]), b"", pattern(1000, 3), b"", fw]
        assert [g[1] for g in got] == [(1024,), (3 * PAGE // 4 - 1000,), (0,), (1000,), (0, 4), (3 * PAGE // 4,)]
        assert [g[3] for g in got] == ["torch.float32", "torch.int32", "torch.int32", "torch.uint8", "torch.float32", "torch.int32"]
        assert imports == 3
        # A 0-byte tensor alone, and an empty list.
        got, imports = ray.get(pair.receiver.take.remote(send(pair, "zero")))
        assert (got, imports) == ([(b"", (0,), (1,), "torch.int32", "cpu")], 0)
        got, imports = ray.get(pair.receiver.take.remote(send(pair, [])))
        assert (got, imports) == ([], 0)
        stuck_receiver, live, stuck_sender = pair.close()
        assert (stuck_receiver, live, stuck_sender) == ([], [], [])


def test_receive_into_target_buffers(kind, cluster):
    """``ray.get`` with target buffers copies into them (devipc's copies for contiguous
    tensors; torch's out of a view for a transposed one), returns them, and closes the
    imports; plain ``cpu`` tensors and devipc buffers both take the copies."""
    _need(f"test_receive_into_target_buffers[{kind}]")
    with Pair(kind) as pair:
        ray.get([
            pair.sender.make.remote("fw", "framework", 2 * PAGE, 4, "float32"),
            pair.sender.make.remote("buf", "buffer", 4096, 5, "int16"),
        ])
        ray.get(pair.sender.derive.remote([
            ("square", "fw", "t[:1024].view(32, 32)"),
            ("tr", "square", "t[2:10, 4:].t()"),
            ("mid", "buf", "t[100:1100]"),
            ("zero", "buf", "t[:0]"),
        ]))
        fw = torch.frombuffer(bytearray(pattern(2 * PAGE, 4)), dtype=torch.float32)
        square = fw[:1024].view(32, 32)
        buf = torch.frombuffer(bytearray(pattern(4096, 5)), dtype=torch.int16)
        want = [square, square[2:10, 4:].t(), buf[100:1100], buf[:0]]
        names = ["square", "tr", "mid", "zero"]
        for memory in ("host", "buffer"):
            targets = [(tuple(w.shape), str(w.dtype).removeprefix("torch."), memory) for w in want]
            got, same, live_imports = ray.get(pair.receiver.take_into.remote(pair.sender, names, targets))
            assert same == [True] * 4
            assert [g[0] for g in got] == [bytes(w.contiguous().view(torch.uint8).reshape(-1).numpy()) for w in want]
            assert [g[2] for g in got] == [w.contiguous().stride() for w in want]
            assert live_imports == 0
        assert pair.close() == ([], [], [])


def test_a_dropped_object_ref_releases_the_export(kind, cluster):
    """Dropping the reference ends the sender's export of framework memory once the
    receiver dropped its zero-copy view: meanwhile the export is deferred (the sender keeps
    the tensor, so torch cannot reuse the memory the receiver sees), and the receiver's
    view stays valid. A devipc buffer's export needs no deferral."""
    _need(f"test_a_dropped_object_ref_releases_the_export[{kind}]")
    with Pair(kind) as pair:
        ray.get(pair.sender.make.remote("fw", "framework", PAGE, 6))
        ray.get(pair.sender.make.remote("buf", "buffer", PAGE, 7))
        ref = send(pair, "fw")
        obj = ref.hex()
        got, _ = ray.get(pair.receiver.take.remote(ref, keep=True))
        assert got[0][0] == pattern(PAGE, 6)
        assert ray.get(pair.sender.exports.remote()) == ([obj], [], [True])
        del ref

        def exports_become(want, timeout=20.0):
            deadline = time.monotonic() + timeout
            while (now := ray.get(pair.sender.exports.remote())) != want and time.monotonic() < deadline:
                time.sleep(0.05)
            return now

        # Ray garbage-collected the object; the receiver still maps the block.
        assert exports_become(([], [obj], [True])) == ([], [obj], [True])
        time.sleep(0.3)  # a few of the release thread's retries
        assert ray.get(pair.sender.exports.remote()) == ([], [obj], [True])
        assert ray.get(pair.receiver.live_imports.remote()) == 1
        ray.get(pair.receiver.drop.remote())
        assert exports_become(([], [], [False])) == ([], [], [False])
        # A devipc buffer: nothing to defer.
        ref = send(pair, "buf")
        got, _ = ray.get(pair.receiver.take.remote(ref, keep=True))
        assert got[0][0] == pattern(PAGE, 7)
        del ref
        assert exports_become(([], [], [False])) == ([], [], [False])
        assert pair.close() == ([], [], [])


def test_the_receiver_finds_the_senders_device_by_its_identity(kind, cluster):
    """A receiver that sees only physical device 1 (a visibility mask: it is the
    receiver's device 0) receives a tensor of the sender's device 1, and gets
    ``DeviceNotVisibleError`` for one of device 0, with nothing left imported."""
    _need(f"test_the_receiver_finds_the_senders_device_by_its_identity[{kind}]")
    mask = {"hip": "HIP_VISIBLE_DEVICES", "ascend": "ASCEND_RT_VISIBLE_DEVICES"}[kind]
    with Pair(kind, receiver_env={mask: "1"}) as pair:
        ray.get([
            pair.sender.make.remote("one", "buffer", PAGE, 9, device=1),
            pair.sender.make.remote("zero", "buffer", PAGE, 10, device=0),
        ])
        got, imports = ray.get(pair.receiver.take.remote(send(pair, "one")))
        assert (got[0][0], imports) == (pattern(PAGE, 9), 1)
        with pytest.raises(Exception, match="not visible in this process") as err:
            ray.get(pair.receiver.take.remote(send(pair, "zero")))
        assert "DeviceNotVisibleError" in str(err.value), err.value
        assert ray.get(pair.receiver.live_imports.remote()) == 0
        assert pair.close() == ([], [], [])


def test_a_receiver_on_another_node_is_refused(kind, cluster, monkeypatch):
    """Metadata from another Ray node: ``UnsupportedError`` naming Ray's transports that
    cross nodes, before anything is imported."""
    _need(f"test_a_receiver_on_another_node_is_refused[{kind}]")
    import devipc.ray
    import devipc.torch

    monkeypatch.setenv("DEVIPC_BACKEND", f"emulated-{kind}")
    transport = devipc.ray.DevipcTransport()
    try:
        t = devipc.torch.empty(devipc.ray.runtime(), (64,), torch.float32)
        meta = transport.extract_tensor_transport_metadata("far", [t])
        far = dataclasses.replace(meta, node_id="f" * 56)
        before = devipc.ray.runtime().live_imports()
        with pytest.raises(devipc.errors.UnsupportedError) as err:
            transport.recv_multiple_tensors("far", far, devipc.ray.DevipcCommunicatorMetadata())
        text = str(err.value)
        for word in ("NIXL", "nccl", "gloo", "collective", "f" * 56, meta.node_id):
            assert word in text, text
        assert err.value.kind == "unsupported"
        assert devipc.ray.runtime().live_imports() == before
        transport.garbage_collect("far", meta, [t])
        del t
    finally:
        assert devipc.ray.shutdown() == []


def test_tensors_the_runtime_cannot_share_are_refused(kind, cluster, monkeypatch):
    """A tensor of another device type than the runtime's, a ``cpu`` tensor outside
    emulated device memory on the emulator, or tensors on two devices:
    ``InvalidArgumentError`` saying what to do; nothing stays exported, not even the
    framework block shared before the failing tensor."""
    _need(f"test_tensors_the_runtime_cannot_share_are_refused[{kind}]")
    import ctypes

    import devipc.ray
    import devipc.testing
    import devipc.torch

    monkeypatch.setenv("DEVIPC_BACKEND", f"emulated-{kind}")
    transport = devipc.ray.DevipcTransport()
    rt = devipc.ray.runtime()
    ptr = devipc.testing.framework_malloc(rt, PAGE)
    try:
        framework = torch.frombuffer((ctypes.c_char * PAGE).from_address(ptr), dtype=torch.uint8)
        with pytest.raises(devipc.errors.InvalidArgumentError, match="sends cpu tensors, but tensor 0 is on meta"):
            transport.extract_tensor_transport_metadata("meta", [torch.empty(4, device="meta")])
        with pytest.raises(devipc.errors.InvalidArgumentError, match=r"devipc\.torch\.empty"):
            transport.extract_tensor_transport_metadata("host", [framework, torch.ones(1024)])
        assert rt.external_block(ptr) is None
        with pytest.raises(devipc.errors.InvalidArgumentError, match=r"on one device; these are on devices \[0, 1\]"):
            transport.extract_tensor_transport_metadata("two", [framework, devipc.torch.empty(rt, (8,), torch.uint8, device=1)])
        assert rt.external_block(ptr) is None
        with pytest.raises(devipc.errors.InvalidArgumentError, match="item 1 is a str"):
            transport.extract_tensor_transport_metadata("str", [torch.ones(1), "x"])
        assert devipc.ray.live_exports() == []
        del framework
        with pytest.raises(devipc.errors.InvalidArgumentError, match="another transport"):
            from ray.experimental.rdt.tensor_transport_manager import TensorTransportMetadata

            transport.recv_multiple_tensors("x", TensorTransportMetadata([((1,), torch.float32)]), None)
    finally:
        assert devipc.ray.shutdown() == []
        devipc.testing.framework_free(rt, ptr)


def test_an_abort_ends_a_receive_in_progress(kind, cluster):
    """A receive waiting for the sender's post (a doctored generation never posted) is
    ended by ``abort_transport``: it raises ``ClosedError`` at once and its imports are
    closed; an abort of an object no receive is under way for is a no-op."""
    _need(f"test_an_abort_ends_a_receive_in_progress[{kind}]")
    with Pair(kind) as pair:
        ray.get(pair.sender.make.remote("buf", "buffer", PAGE, 8))
        meta = ray.get(pair.sender.doctored.remote("buf", generation=1))
        outcome, during, after, took = ray.get(pair.receiver.recv_and_abort.remote(meta), timeout=60)
        assert len(outcome) == 1 and outcome[0][0] == "ClosedError", outcome
        assert "aborted" in outcome[0][1], outcome
        assert (during, after) == (1, 0)
        assert took < 10
        ray.get(pair.sender.forget.remote("doctored"))
        assert pair.close() == ([], [], [])


def readme_example() -> str:
    text = README.read_text()
    section = text[text.index("### Ray: a tensor transport (devipc.ray)") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_ray_example_runs_as_written(cluster, tmp_path):
    """The README section's two-actor example, run as a script with
    ``DEVIPC_BACKEND=emulated-hip`` (against this module's Ray instance, through
    ``RAY_ADDRESS``, to save starting another)."""
    _need("test_the_readme_ray_example_runs_as_written")
    script = tmp_path / "ray_example.py"
    script.write_text(readme_example())
    env = dict(os.environ, DEVIPC_BACKEND="emulated-hip", RAY_ADDRESS=cluster)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "the consumer sums 523776.0" in out.stdout, out.stdout


def test_the_p12_benchmark_runs(tmp_path):
    """P12's script (bench/ray_transport.py) runs, with its own Ray instance, and prints
    both ratios."""
    _need("test_the_p12_benchmark_runs")
    bench = pathlib.Path(__file__).resolve().parents[1] / "bench" / "ray_transport.py"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["DEVIPC_BACKEND"] = "emulated-hip"
    out = subprocess.run(
        [sys.executable, str(bench), "--mib", "8", "--rounds", "1"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "ratio (a)/(b)" in out.stdout and "ratio (a)/(c)" in out.stdout, out.stdout
    assert "left exported" not in out.stdout, out.stdout
