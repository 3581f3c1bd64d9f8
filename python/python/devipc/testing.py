"""Test aids: device memory allocated the way a framework allocates it (``hipMalloc``,
``aclrtMalloc``), outside devipc's buffers, to exercise ``Runtime.export_external``
without a framework (tests, examples); on the emulator, a stream held busy
(``hold_stream``) so that work enqueued on it is provably in flight; and
``wait_for_drained``, the background release of requests dropped unfinished. Not for
production code: a framework's own allocator owns the memory there.

The functions take the runtime first, then the arguments in the order of the rest of the
API (``device`` last, default 0).
"""

from __future__ import annotations

from ._devipc import (
    Runtime,
    Stream,
    _framework_free,
    _framework_malloc,
    _hold_stream,
    _release_stream,
    _wait_for_drained,
)

__all__ = [
    "framework_free",
    "framework_malloc",
    "hold_stream",
    "release_stream",
    "wait_for_drained",
]


def framework_malloc(runtime: Runtime, size: int, device: int = 0) -> int:
    """Allocates ``size`` bytes on ``device`` as a framework's own allocator does and
    returns the device address; free it with ``framework_free``."""
    return _framework_malloc(runtime, size, device)


def framework_free(runtime: Runtime, ptr: int, device: int = 0) -> None:
    """Frees a block ``framework_malloc`` returned for ``runtime``, after ending its
    ``export_external`` exports (refused while another process still maps it); works after
    ``runtime.close()`` too. Drop every view of it in this process first."""
    _framework_free(runtime, ptr, device)


def hold_stream(stream: Stream) -> None:
    """Emulator only: holds ``stream`` as if a long kernel occupied it; the work enqueued
    on it stays queued until ``release_stream`` (``UnsupportedError`` on a real runtime).
    Release every stream you hold."""
    _hold_stream(stream)


def release_stream(stream: Stream) -> None:
    """Emulator only: releases a stream ``hold_stream`` held; returns once the work
    queued meanwhile ran."""
    _release_stream(stream)


def wait_for_drained(timeout: float = 10.0) -> bool:
    """Waits at most ``timeout`` seconds until devipc released every request and stream
    this process dropped before they completed; whether it did."""
    return _wait_for_drained(timeout)
