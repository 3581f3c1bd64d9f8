"""The torch front end: tensors that are views of one devipc allocation travel as one
descriptor and come back through torch.from_dlpack with one vendor import. Needs torch
(skips loudly without it; the numpy tests cover the same core path). `cargo test` runs
this file in its own test, `torch_tests_pass` (tests/pytest.rs)."""

from __future__ import annotations

import devipc
from devipc.testing import framework_free, framework_malloc
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
