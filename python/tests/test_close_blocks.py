"""``close_external`` over many storages of few framework blocks (``devipc.torch``'s
``close_external``, without torch): a caching allocator carves many storages from one
``hipMalloc``/``aclrtMalloc`` block, which share that block's export; each block is
closed once, and a failure does not leave the other blocks exported."""

from __future__ import annotations

import pytest

import devipc
import devipc.torch
from devipc.testing import framework_free, framework_malloc

PAGE = 4096  # Ascend exports framework blocks by IPC key, in whole pages


def test_external_block_names_the_exported_block_holding_an_address(kind):
    rt = devipc.Runtime.emulated(kind)
    a = framework_malloc(rt, 4 * PAGE)
    try:
        assert rt.external_block(a) is None
        rt.export_external(a + PAGE, PAGE, any_process=True)
        assert rt.external_block(a + 3 * PAGE + 5) == (a, 4 * PAGE)
        assert rt.external_block(a + 4 * PAGE) is None
        rt.close_external(a + 2 * PAGE)
        assert rt.external_block(a) is None
    finally:
        framework_free(rt, a)


def test_storages_of_one_block_close_it_once(kind):
    rt = devipc.Runtime.emulated(kind)
    a, b = framework_malloc(rt, 4 * PAGE), framework_malloc(rt, 2 * PAGE)
    try:
        # Two storages in block a, as the caching allocator carves them, one in block b.
        storages = [(0, a), (0, a + 2 * PAGE), (0, b)]
        for _, ptr in storages:
            rt.export_external(ptr, PAGE, any_process=True)
        devipc.torch.close_blocks(rt, storages)
        assert rt.external_block(a) is None and rt.external_block(b) is None
        # Both blocks' exports ended: nothing is left for close_external to end.
        for ptr in (a, b):
            with pytest.raises(devipc.errors.InvalidArgumentError, match="no block exported"):
                rt.close_external(ptr)
    finally:
        framework_free(rt, a)
        framework_free(rt, b)


def test_a_failure_does_not_stop_the_other_blocks_closing(kind):
    rt = devipc.Runtime.emulated(kind)
    a, b = framework_malloc(rt, PAGE), framework_malloc(rt, PAGE)
    try:
        rt.export_external(a, PAGE, any_process=True)
        rt.export_external(b, PAGE, any_process=True)
        # Addresses in no exported block, sorted before a and b: each fails.
        with pytest.raises(devipc.errors.InvalidArgumentError) as failed:
            devipc.torch.close_blocks(rt, [(0, b), (0, 16), (0, 32), (0, a)])
        assert "no block exported" in str(failed.value)
        assert any("also failed" in n for n in failed.value.__notes__)
        assert rt.external_block(a) is None and rt.external_block(b) is None
        for ptr in (a, b):
            with pytest.raises(devipc.errors.InvalidArgumentError, match="no block exported"):
                rt.close_external(ptr)
    finally:
        framework_free(rt, a)
        framework_free(rt, b)
