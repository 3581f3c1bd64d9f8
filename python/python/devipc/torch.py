"""torch front end of tensor sharing (torch is imported when a function is called, not
when ``devipc.torch`` is imported).

``share`` groups tensors by storage: a tensor whose storage lies in a devipc buffer
(``buffers=``) travels through that buffer's token; any other storage is memory from
torch's own allocator and is exported with ``Runtime.export_external`` (one token per
storage; HIP shares one vendor handle between storages of one ``hipMalloc`` block). Call
``close_external`` once the consumers are done, before torch frees those storages.
``rebuild`` makes the tensors with ``torch.from_dlpack``: one import per allocation.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ._devipc import InvalidArgumentError, Runtime, SharedBuffer
from .tensors import Descriptor, Placed, describe
from .tensors import rebuild as _rebuild


def _device_index(t: Any) -> int:
    return t.device.index if t.device.index is not None else 0


def _place(t: Any, buffers: Sequence[SharedBuffer]) -> Placed:
    import torch

    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"expected a torch.Tensor, got {type(t).__name__}")
    storage = t.untyped_storage()
    base, nbytes = storage.data_ptr(), storage.nbytes()
    dtype = str(t.dtype).removeprefix("torch.")
    for i, buf in enumerate(buffers):
        if buf.ptr <= base and base + nbytes <= buf.ptr + len(buf):
            return Placed(("buffer", i), dtype, tuple(t.shape), tuple(t.stride()), t.data_ptr() - buf.ptr)
    key = ("external", _device_index(t), base, nbytes)
    return Placed(key, dtype, tuple(t.shape), tuple(t.stride()), t.data_ptr() - base)


def share(
    rt: Runtime,
    tensors: Iterable[Any],
    peers: Sequence[int] = (),
    buffers: Sequence[SharedBuffer] = (),
    any_process: bool = False,
) -> Descriptor:
    """Describes ``tensors`` (one token per allocation), granted to ``peers``."""
    buffers = list(buffers)

    def export(key: Any) -> str:
        if key[0] == "buffer":
            buf = buffers[key[1]]
            token = buf.export(any_process=any_process)
            if peers:
                buf.grant(token, list(peers))
            return token
        _, device, base, nbytes = key
        token = rt.export_external(base, nbytes, device=device, any_process=any_process)
        if peers:
            rt.grant(token, list(peers))
        return token

    return describe((_place(t, buffers) for t in tensors), export)


def close_external(rt: Runtime, tensors: Iterable[Any], buffers: Sequence[SharedBuffer] = ()) -> None:
    """Ends the ``export_external`` exports ``share`` made for ``tensors`` (call it after
    the consumers closed their imports, before torch frees the storages)."""
    seen = set()
    for t in tensors:
        p = _place(t, buffers)
        if p.key[0] == "external" and p.key not in seen:
            seen.add(p.key)
            rt.close_external(p.key[2], device=p.key[1])


def rebuild(rt: Runtime, desc: Descriptor, device: int = 0) -> list[Any]:
    """The tensors of ``desc``, made with ``torch.from_dlpack`` over the imported memory."""
    import torch

    return _rebuild(rt, desc, torch.from_dlpack, device)
