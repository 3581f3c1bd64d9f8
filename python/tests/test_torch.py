"""The torch front end: tensors that are views of one devipc allocation travel as one
descriptor and come back through torch.from_dlpack with one vendor import. Needs torch
(skips loudly without it; the numpy tests cover the same core path). `cargo test` runs
this file in its own test, `torch_tests_pass` (tests/pytest.rs)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np

import devipc
from devipc.testing import framework_free, framework_malloc
import refit_roles
import roles
from conftest import loud_skip

try:
    import torch
except Exception as e:  # noqa: BLE001 - any failure to import means "no usable torch"
    torch = None
    TORCH_MISSING = f"torch does not import here ({type(e).__name__}: {str(e)[:120]}); pip install torch"

N = 200


def test_torch_tensors_travel_as_one_descriptor(kind, ctx):
    if torch is None:
        loud_skip(f"test_torch_tensors_travel_as_one_descriptor[{kind}]", TORCH_MISSING)
    import devipc.torch

    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.torch_consumer, args=(kind, inbox, outbox))
    child.start()
    try:
        peer = outbox.get(timeout=120)
        buf = rt.allocate(N * 64 * 4)
        whole = torch.from_dlpack(buf.view("float32", [N, 8, 8]))
        for k in range(N):
            whole[k] = k % 251
        tensors = [whole[k] if k % 2 == 0 else whole[k].t() for k in range(N)]
        desc = devipc.torch.share(rt, tensors, peers=[peer], buffers=[buf])
        assert len(desc.allocations) == 1 and len(desc.tensors) == N
        inbox.put(desc)
        got = outbox.get(timeout=120)
        assert got[0] == "rebuilt", got
        _, count, imports, wrong, strides = got
        assert (count, imports, wrong) == (N, 1, [])
        assert strides == [(8, 1), (1, 8)]
        assert float(whole[1][0, 0]) == -1.0
        inbox.put("bye")
        assert outbox.get(timeout=60) == ("closed", 0)
        child.join(60)
        assert child.exitcode == 0
        del whole, tensors
        buf.close()
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_torch_allocator_memory_travels_through_export_external(kind, ctx):
    """Storage that is not a devipc buffer is framework memory, exported with
    export_external (one token per storage) and ended with close_external. On the
    emulator the framework's block comes from ``devipc.testing.framework_malloc`` (``hipMalloc``
    / ``aclrtMalloc``, which is host shared memory here, so a CPU tensor can live in it)."""
    if torch is None:
        loud_skip(f"test_torch_allocator_memory_travels_through_export_external[{kind}]", TORCH_MISSING)
    import ctypes

    import devipc.torch

    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.torch_consumer, args=(kind, inbox, outbox))
    child.start()
    try:
        peer = outbox.get(timeout=120)
        # Whole pages: Ascend exports framework blocks by IPC key, in 4 KiB pages.
        nbytes = (N * 64 * 4 + 4095) // 4096 * 4096
        ptr = framework_malloc(rt, nbytes)
        block = (ctypes.c_char * nbytes).from_address(ptr)
        whole = torch.frombuffer(block, dtype=torch.float32)[: N * 64].view(N, 8, 8)
        assert whole.untyped_storage().data_ptr() == ptr
        for k in range(N):
            whole[k] = k % 251
        tensors = [whole[k] if k % 2 == 0 else whole[k].t() for k in range(N)]
        desc = devipc.torch.share(rt, tensors, peers=[peer])  # no buffers: external
        assert len(desc.allocations) == 1
        mechanism = devipc.token_info(desc.allocations[0])["mechanism"]
        assert mechanism == {"hip": "hip-ipc-mem", "ascend": "ascend-ipc-key"}[kind]
        inbox.put(desc)
        got = outbox.get(timeout=120)
        assert got[0] == "rebuilt", got
        assert got[1:4] == (N, 1, []), got
        assert float(whole[1][0, 0]) == -1.0
        inbox.put("bye")
        assert outbox.get(timeout=60) == ("closed", 0)
        child.join(60)
        assert child.exitcode == 0
        devipc.torch.close_external(rt, tensors)
        del whole, tensors, block
        framework_free(rt, ptr)
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_torch_views_of_a_devipc_buffer_need_it_named(kind):
    """A tensor over a devipc buffer is not framework memory: without ``buffers=`` the
    export is refused (its own lease would let the buffer's free pull the memory from its
    importers) with the remedy in the message."""
    if torch is None:
        loud_skip(f"test_torch_views_of_a_devipc_buffer_need_it_named[{kind}]", TORCH_MISSING)
    import pytest

    import devipc.torch

    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(N * 64 * 4) as buf:
        whole = torch.from_dlpack(buf.view("float32", [N, 8, 8]))
        with pytest.raises(devipc.errors.InvalidArgumentError, match="devipc allocation"):
            devipc.torch.share(rt, [whole[0]], any_process=True)
        desc = devipc.torch.share(rt, [whole[0]], any_process=True, buffers=[buf])
        assert len(desc.allocations) == 1
        del whole


def test_close_external_ends_a_block_shared_by_several_storages_once(kind):
    """torch's caching allocator carves many storages from one ``hipMalloc`` /
    ``aclrtMalloc`` block, which share the block's export: ``close_external`` ends it
    once, instead of failing on the second storage ("no block exported ... holds") and
    leaving the blocks after it exported."""
    if torch is None:
        loud_skip(f"test_close_external_ends_a_block_shared_by_several_storages_once[{kind}]", TORCH_MISSING)
    import ctypes

    import devipc.torch

    rt = devipc.Runtime.emulated(kind)
    page = 4096  # Ascend exports framework blocks by IPC key, in whole pages
    ptrs = [framework_malloc(rt, 4 * page), framework_malloc(rt, page)]
    blocks = [(ctypes.c_char * (4 * page)).from_address(ptrs[0]), (ctypes.c_char * page).from_address(ptrs[1])]
    # Two storages in the first block, one in the second.
    tensors = [
        torch.frombuffer(blocks[0], dtype=torch.float32, count=page // 4),
        torch.frombuffer(blocks[0], dtype=torch.float32, count=page // 4, offset=2 * page),
        torch.frombuffer(blocks[1], dtype=torch.float32),
    ]
    assert len({t.untyped_storage().data_ptr() for t in tensors}) == 3
    desc = devipc.torch.share(rt, tensors, any_process=True)
    assert len(desc.allocations) == 3
    devipc.torch.close_external(rt, tensors)
    assert [rt.external_block(p) for p in ptrs] == [None, None]
    del tensors, blocks
    for p in ptrs:
        framework_free(rt, p)


def test_refit_copies_framework_and_vmm_tensors_in_stream_order(kind, tmp_path):
    """devipc.refit reads torch tensors in the framework's device memory (on the emulator,
    CPU tensors over ``framework_malloc`` blocks) and in VMM memory (HIP ``hip-vmm-fd``,
    which ``reduce_tensor`` cannot share on ROCm >= 7.0.2) with stream-ordered device
    copies (VMM memory of devipc's on Ascend), and writes the consumer's framework tensors
    the same way: byte-exact, bf16
    included, a tensor larger than a bucket included."""
    if torch is None:
        loud_skip(f"test_refit_copies_framework_and_vmm_tensors_in_stream_order[{kind}]", TORCH_MISSING)
    import ctypes
    import threading

    import devipc.refit

    rt = devipc.Runtime.emulated(kind)
    blocks = []

    def framework_tensor(n, dtype):
        nbytes = (n * torch.empty(0, dtype=dtype).element_size() + 4095) // 4096 * 4096
        ptr = framework_malloc(rt, nbytes)
        blocks.append(ptr)
        raw = (ctypes.c_char * nbytes).from_address(ptr)
        return torch.frombuffer(raw, dtype=torch.uint8).view(dtype)[:n]

    shapes = {"embed": (3000, 4), "norm": (64,), "proj": (17, 5)}
    src = {}
    for i, (name, shape) in enumerate(shapes.items()):
        t = framework_tensor(int(np.prod(shape)), torch.bfloat16).view(shape)
        t.copy_(torch.arange(t.numel(), dtype=torch.float32).view(shape) * (i + 1) / 7)
        src[name] = t
    # Ascend's devipc memory is VMM memory by default (its only way); HIP's is asked for.
    mechanism = {"hip": "hip-vmm-fd", "ascend": None}[kind]
    vmm = rt.allocate(8192, options=devipc.AllocateOptions(mechanism=mechanism))
    assert devipc.token_info(vmm.export())["mechanism"] == f"{kind}-vmm" + ("-fd" if kind == "hip" else "")
    src["vmm"] = torch.from_dlpack(vmm.view("int32", [2048]))
    src["vmm"].copy_(torch.arange(2048, dtype=torch.int32) * 3)
    dst = {name: framework_tensor(t.numel(), t.dtype).view(t.shape) for name, t in src.items()}
    for t in dst.values():
        t.zero_()
    path = str(tmp_path / "refit.sock")
    with devipc.refit.Producer(rt, path, consumers=1, bucket_bytes=16384, buckets=2) as p:
        box = {}
        c = refit_roles.connect_one(p, rt, path)
        r = threading.Thread(target=lambda: box.setdefault("names", c.receive(dst, timeout=60)))
        r.start()
        p.send(src, timeout=60)
        r.join()
        assert box["names"] == list(src)
        for name in src:
            assert torch.equal(dst[name], src[name]), name
        # A destination of another dtype is refused (after the step's buckets were acked).
        wrong = dict(dst, norm=framework_tensor(64, torch.float16))
        r = threading.Thread(target=lambda: box.setdefault("err", _raises(lambda: c.receive(wrong, timeout=60))))
        r.start()
        p.send(src, timeout=60)
        r.join()
        assert "'norm' is bfloat16, its destination float16" in str(box["err"])
        c.close()
        p.synchronize()
    del src, dst, wrong, t, r
    vmm.close()
    for ptr in blocks:
        framework_free(rt, ptr)
    rt.close()


def _raises(fn):
    try:
        fn()
    except devipc.DevipcError as e:
        return e
    return None


REFIT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "refit.py"


def test_the_refit_benchmark_runs(tmp_path):
    """P11's script (bench/refit.py) runs on both backends and prints its ratio."""
    if torch is None:
        loud_skip("test_the_refit_benchmark_runs", TORCH_MISSING)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIPC_EMU_DIR")}
    env.pop("DEVIPC_RUNTIME_DIR", None)
    out = subprocess.run(
        [sys.executable, str(REFIT), "--n", "40", "--total-mib", "4", "--bucket-mib", "1", "--steps", "1"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l.startswith("P11 ")]
    assert [l.split()[1] for l in lines] == ["ascend:", "hip:"], out.stdout
    for line in lines:
        assert "40 tokens + rebuild" in line and "ratio" in line, line
