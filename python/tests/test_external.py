"""Framework memory (``export_external``) without torch: a block of the vendor's own
allocator (``devipc.testing.framework_malloc``: ``hipMalloc`` / ``aclrtMalloc``) travels to
another process, and its free waits for nobody but is refused while an importer maps it;
devipc's own buffers are never exported as framework memory (their tokens would carry a
lease of their own, so the buffer's free would pull the memory from the importers)."""

from __future__ import annotations

import ctypes

import pytest

import devipc
from devipc.testing import framework_free, framework_malloc
import roles
from conftest import violations

BLOCK = 1 << 20


class Reader:
    """A child (``roles.external_reader``) that imports a token and reads its first 16
    bytes (``read``), closes the import (``close``) and exits (``finish``); killed on
    leaving the ``with`` block if it is still running (a failed test)."""

    def __init__(self, kind, ctx):
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.child = ctx.Process(target=roles.external_reader, args=(kind, self.inbox, self.outbox))

    def __enter__(self):
        self.child.start()
        return self

    def read(self, token):
        self.inbox.put(token)
        got = self.outbox.get(timeout=120)
        assert got[0] == "read", got
        return got[1]

    def close(self):
        self.inbox.put("close")
        assert self.outbox.get(timeout=60) == "closed"

    def finish(self):
        self.inbox.put(None)
        self.child.join(60)
        assert self.child.exitcode == 0

    def __exit__(self, *exc):
        if self.child.is_alive():
            self.child.kill()
            self.child.join()


def test_devipc_buffers_are_not_framework_memory(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(BLOCK) as buf:
        for ptr, size in [(buf.ptr, len(buf)), (buf.ptr + 8192, 4096), (buf.ptr + len(buf) - 16, 64)]:
            with pytest.raises(devipc.errors.InvalidArgumentError, match="devipc allocation"):
                rt.export_external(ptr, size, any_process=True)
        # The buffer itself is untouched.
        buf.export(any_process=True)


def test_a_framework_block_travels_and_its_free_waits_for_the_importer(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    ptr = framework_malloc(rt, BLOCK)
    ctypes.memmove(ptr, b"framework bytes!", 16)
    token = rt.export_external(ptr, BLOCK, any_process=True)
    with Reader(kind, ctx) as reader:
        assert reader.read(token) == b"framework bytes!"
        # The importer still maps the block: ending the export (and so the free) is refused.
        with pytest.raises(devipc.DevipcError):
            framework_free(rt, ptr)
        reader.close()
        framework_free(rt, ptr)
        with pytest.raises(devipc.errors.InvalidArgumentError, match="not a live block"):
            framework_free(rt, ptr)
        reader.finish()
        # The token ended with the block.
        with pytest.raises(devipc.DevipcError):
            rt.export_external(ptr, BLOCK)


def test_framework_free_takes_only_its_own_blocks(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(BLOCK) as buf:
        with pytest.raises(devipc.errors.InvalidArgumentError, match="not a live block"):
            framework_free(rt, buf.ptr)
    with pytest.raises(devipc.errors.InvalidArgumentError):
        framework_malloc(rt, 0)
    ptr = framework_malloc(rt, 4096)
    rt.close()
    with pytest.raises(devipc.errors.ClosedError):
        framework_malloc(rt, 4096)
    framework_free(rt, ptr)  # a block outlives the handle's close, and is still freed


def test_a_buffer_is_devipc_memory_for_every_runtime_and_until_really_freed(kind, ctx):
    """Another Runtime of the process cannot export the buffer as framework memory, nor
    can anyone once the buffer's free is deferred (an importer still maps it): the memory
    is devipc's until the vendor freed it."""
    rt, other = devipc.Runtime.emulated(kind), devipc.Runtime.emulated(kind)
    buf = rt.allocate(BLOCK)
    buf.write(b"devipc's own mem")
    ptr = buf.ptr
    with pytest.raises(devipc.errors.InvalidArgumentError, match="devipc allocation"):
        other.export_external(ptr, 4096, any_process=True)
    with Reader(kind, ctx) as reader:
        assert reader.read(buf.export(any_process=True)) == b"devipc's own mem"
        buf.close()  # HIP defers the hipFree: the child maps it
        for r in (rt, other):
            with pytest.raises(devipc.DevipcError) as refused:
                r.export_external(ptr, 4096, any_process=True)
            if kind == "hip":
                assert isinstance(refused.value, devipc.errors.InvalidArgumentError)
                assert "devipc allocation" in str(refused.value)
            # Ascend unmaps the exporter's range at once (the importer's mapping keeps the
            # physical memory): the runtime knows no memory there any more.
        reader.close()
        reader.finish()


def test_a_block_exported_under_another_device_is_not_freed_under_its_importer(kind, ctx):
    """HIP refuses to export a block under another device than its own (the runtime
    says which it is on); Ascend cannot tell, so framework_free ends the block's exports
    under any device first, refused while an importer maps it."""
    rt = devipc.Runtime.emulated(kind)
    ptr = framework_malloc(rt, BLOCK)
    ctypes.memmove(ptr, b"framework bytes!", 16)
    if kind == "hip":
        with pytest.raises(devipc.errors.InvalidArgumentError, match="not of device 1"):
            rt.export_external(ptr, BLOCK, device=1, any_process=True)
        framework_free(rt, ptr)
        return
    token = rt.export_external(ptr, BLOCK, device=1, any_process=True)
    with Reader(kind, ctx) as reader:
        reader.read(token)
        with pytest.raises(devipc.DevipcError):
            framework_free(rt, ptr)
        reader.close()
        framework_free(rt, ptr)
        reader.finish()


def test_a_block_exported_through_another_runtime_is_not_freed_under_its_importer(kind, ctx):
    """Audit N3, as it was reproduced: the block is allocated through one Runtime and
    exported through a second of the same process; a spawned child imports and holds it.
    framework_free through the first is refused (the exports are the process's, not the
    exporting Runtime's) and the emulator records no free under the importer; once the
    child closed, the free goes through and ends the second runtime's export too."""
    first, second = devipc.Runtime.emulated(kind), devipc.Runtime.emulated(kind)
    ptr = framework_malloc(first, BLOCK)
    ctypes.memmove(ptr, b"framework bytes!", 16)
    token = second.export_external(ptr, BLOCK, any_process=True)
    with Reader(kind, ctx) as reader:
        assert reader.read(token) == b"framework bytes!"
        with pytest.raises(devipc.errors.InvalidArgumentError, match="importers still"):
            framework_free(first, ptr)
        with pytest.raises(devipc.errors.InvalidArgumentError, match="importers still"):
            first.close_external(ptr)
        assert violations() == ""
        assert ctypes.string_at(ptr, 16) == b"framework bytes!"
        reader.close()
        framework_free(first, ptr)
        reader.finish()
    with pytest.raises(devipc.errors.InvalidArgumentError, match="no block exported"):
        second.close_external(ptr)
