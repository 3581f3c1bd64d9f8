"""Test aids: device memory allocated the way a framework allocates it (``hipMalloc``,
``aclrtMalloc``), outside devipc's buffers, to exercise ``Runtime.export_external``
without a framework (tests, examples). Not for production code: a framework's own
allocator owns the memory there.

The functions take the runtime first, then the arguments in the order of the rest of the
API (``device`` last, default 0).
"""

from __future__ import annotations

from ._devipc import Runtime, _framework_free, _framework_malloc

__all__ = ["framework_free", "framework_malloc"]


def framework_malloc(runtime: Runtime, size: int, device: int = 0) -> int:
    """Allocates ``size`` bytes on ``device`` as a framework's own allocator does and
    returns the device address; free it with ``framework_free``."""
    return _framework_malloc(runtime, size, device)


def framework_free(runtime: Runtime, ptr: int, device: int = 0) -> None:
    """Frees a block ``framework_malloc`` returned for ``runtime``, after ending its
    ``export_external`` exports (refused while another process still maps it); works after
    ``runtime.close()`` too. Drop every view of it in this process first."""
    _framework_free(runtime, ptr, device)
