"""torch front end of tensor sharing (torch is imported when a function is called, not
when ``devipc.torch`` is imported).

``share`` groups tensors by storage: a tensor whose storage lies in a devipc buffer
(``buffers=``) travels through that buffer's token; any other storage is memory from
torch's own allocator and is exported with ``Runtime.export_external`` (one token per
storage; storages torch's caching allocator carved from one ``hipMalloc``/``aclrtMalloc``
block share that block's export). Call ``close_external`` once the consumers are done,
before torch frees those storages: it ends each block's export once.
``rebuild`` makes the tensors with ``torch.from_dlpack``: one import per allocation.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ._devipc import Runtime, SharedBuffer
from .errors import DevipcError, InvalidArgumentError
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
    the consumers closed their imports, before torch frees the storages): each block
    once, however many of the storages it holds (see ``close_blocks``)."""
    storages = []
    for t in tensors:
        p = _place(t, buffers)
        if p.key[0] == "external":
            storages.append((p.key[1], p.key[2]))
    close_blocks(rt, storages)


def close_blocks(rt: Runtime, storages: Iterable[tuple[int, int]]) -> None:
    """Ends the exports of the framework blocks holding ``storages``, ``(device, address)``
    pairs exported through ``rt.export_external``: each block once (``rt.external_block``
    tells which storages share one), after finding them all. An address in no block of
    ``rt``'s is passed to ``rt.close_external`` as is. A failure does not stop the others:
    every block is tried, then the first error is raised, the later ones added to it as
    notes."""
    targets = set()
    for device, ptr in storages:
        block = rt.external_block(ptr, device=device)
        targets.add((device, block[0] if block is not None else ptr))
    errors: list[DevipcError] = []
    for device, ptr in sorted(targets):
        try:
            rt.close_external(ptr, device=device)
        except DevipcError as e:
            errors.append(e)
    if errors:
        first = errors[0]
        for e in errors[1:]:
            first.add_note(f"also failed: {type(e).__name__}: {e}")
        raise first


def rebuild(rt: Runtime, desc: Descriptor, device: int = 0) -> list[Any]:
    """The tensors of ``desc``, made with ``torch.from_dlpack`` over the imported memory."""
    import torch

    return _rebuild(rt, desc, torch.from_dlpack, device)
