"""numpy front end of tensor sharing: share numpy arrays that are views of devipc
buffers (made with ``numpy.from_dlpack(buf)``; on the emulator device memory is host
memory, so numpy can address it), and rebuild them in another process with
``numpy.from_dlpack``. See ``devipc.tensors`` for the descriptor.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ._devipc import Runtime, SharedBuffer
from .errors import InvalidArgumentError
from .tensors import Descriptor, Placed, describe
from .tensors import rebuild as _rebuild


def _place(arr: Any, buffers: Sequence[SharedBuffer]) -> Placed:
    import numpy

    if not isinstance(arr, numpy.ndarray):
        raise InvalidArgumentError(f"expected a numpy array, got {type(arr).__name__}")
    item = arr.dtype.itemsize
    ptr = arr.__array_interface__["data"][0]
    if any(s % item for s in arr.strides):
        raise InvalidArgumentError(f"strides {arr.strides} are not multiples of {item}")
    strides = tuple(s // item for s in arr.strides)
    low = sum((d - 1) * s for d, s in zip(arr.shape, arr.strides) if d > 0 and s < 0)
    high = sum((d - 1) * s for d, s in zip(arr.shape, arr.strides) if d > 0 and s > 0) + item
    for i, buf in enumerate(buffers):
        if buf.ptr <= ptr + low and ptr + high <= buf.ptr + len(buf):
            return Placed(i, arr.dtype.name, tuple(arr.shape), strides, ptr - buf.ptr)
    raise InvalidArgumentError(
        "the array does not lie inside any of the given devipc buffers "
        "(share views made with numpy.from_dlpack(buffer))"
    )


def share(
    arrays: Iterable[Any],
    buffers: Sequence[SharedBuffer],
    peers: Sequence[int] = (),
    any_process: bool = False,
) -> Descriptor:
    """Describes ``arrays`` (numpy views of ``buffers``): each buffer holding at least one
    of them is exported once (the whole buffer) and granted to ``peers`` (their
    ``Runtime.process_id``)."""
    buffers = list(buffers)
    for buf in buffers:
        if not isinstance(buf, SharedBuffer):
            raise InvalidArgumentError(
                f"buffers must be this process's SharedBuffers (an {type(buf).__name__} "
                "cannot be exported again: share the token it was imported from)"
            )

    def export(key: Any) -> str:
        buf = buffers[key]
        token = buf.export(any_process=any_process)
        if peers:
            buf.grant(token, list(peers))
        return token

    return describe((_place(a, buffers) for a in arrays), export)


def rebuild(rt: Runtime, desc: Descriptor, device: int = 0) -> list[Any]:
    """The arrays of ``desc`` as numpy arrays over the imported memory (zero-copy: needs
    host-addressable memory, i.e. the emulator; one import per allocation)."""
    import numpy

    return _rebuild(rt, desc, numpy.from_dlpack, device)
