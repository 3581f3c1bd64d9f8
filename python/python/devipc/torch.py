"""torch front end of tensor sharing (torch is imported when a function is called, not
when ``devipc.torch`` is imported).

``share`` groups tensors by storage: a tensor whose storage lies in a devipc buffer
(``buffers=``, or made by ``empty``) travels through that buffer's token; any other storage is memory from
torch's own allocator and is exported with ``Runtime.export_external`` (one token per
storage; storages torch's caching allocator carved from one ``hipMalloc``/``aclrtMalloc``
block share that block's export). Call ``close_external`` once the consumers are done,
before torch frees those storages: it ends each block's export once.
``rebuild`` makes the tensors with ``torch.from_dlpack``: one import per allocation.

``empty`` allocates a tensor in a devipc buffer (``Runtime.allocate``) and remembers that
buffer for as long as the tensor's storage lives (no longer: the entry goes when torch
frees the storage), so ``share`` finds it without ``buffers=``. On the emulator this is
how a ``cpu`` tensor lives in emulated device memory.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Iterable, Sequence

from ._devipc import Runtime, SharedBuffer, Stream
from ._pyerrors import error
from .errors import DevipcError, InvalidArgumentError, UnsupportedError
from .tensors import Descriptor, Placed, describe
from .tensors import rebuild as _rebuild


# The buffers ``empty`` allocated, by storage address: (a weak reference to the storage,
# the buffer). Each entry is removed by a finalizer when torch frees its storage, so the
# registry never outlives a tensor's memory (the tensor's DLPack capsule holds the memory
# itself; the entry only lets ``share`` name the buffer).
_EMPTY_BUFFERS: dict[int, tuple[Any, SharedBuffer]] = {}
_EMPTY_LOCK = threading.RLock()  # re-entrant: a finalizer may run under it (a GC pass)


def _forget(ptr: int, ref: Any) -> None:
    with _EMPTY_LOCK:
        entry = _EMPTY_BUFFERS.get(ptr)
        if entry is not None and entry[0] is ref:
            del _EMPTY_BUFFERS[ptr]


def _empty_buffer(storage: Any) -> SharedBuffer | None:
    """The buffer ``empty`` allocated for ``storage``, if it did."""
    with _EMPTY_LOCK:
        entry = _EMPTY_BUFFERS.get(storage.data_ptr())
    if entry is not None and entry[0]() is storage:
        return entry[1]
    return None


def empty(rt: Runtime, shape: Sequence[int], dtype: Any, device: int = 0) -> Any:
    """An uninitialised tensor of ``shape`` and ``dtype`` (a ``torch.dtype`` or its name,
    ``"float32"``) in a new devipc buffer on ``device`` (``rt.allocate``), made with
    ``torch.from_dlpack``: a ``cpu`` tensor on the emulator, ``cuda`` on ROCm, ``npu`` on
    Ascend. ``share`` finds its buffer without ``buffers=``, also for views of it, for as
    long as torch keeps the storage; the memory is freed with the last tensor over it
    (devipc defers the free until the importers closed). A tensor of 0 elements still
    takes a buffer of one byte."""
    import torch

    name = str(dtype).removeprefix("torch.") if isinstance(dtype, torch.dtype) else str(dtype)
    try:
        itemsize = torch.empty((), dtype=getattr(torch, name)).element_size()
    except (AttributeError, TypeError):
        raise InvalidArgumentError(f"unsupported dtype {dtype!r} for devipc.torch.empty") from None
    shape = [int(d) for d in shape]
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"negative dimension in shape {shape}")
    numel = 1
    for d in shape:
        numel *= d
    buf = rt.allocate(max(numel * itemsize, 1), device)
    tensor = torch.from_dlpack(buf.view(name, shape))
    storage = tensor.untyped_storage()
    ref = weakref.ref(storage)
    with _EMPTY_LOCK:
        _EMPTY_BUFFERS[storage.data_ptr()] = (ref, buf)
    weakref.finalize(storage, _forget, storage.data_ptr(), ref)
    return tensor


def device_type(rt: Runtime) -> str:
    """The torch device type of ``rt``'s memory: ``cuda`` under HIP (ROCm torch),
    ``npu`` on Ascend (torch_npu), ``cpu`` on the emulator (host shared memory)."""
    if rt.emulated_backend:
        return "cpu"
    return {"hip": "cuda", "ascend": "npu"}.get(rt.backend, rt.backend)


def current_stream(rt: Runtime, device: int = 0) -> Stream:
    """torch's current stream of ``device`` on ``rt``'s device (``torch.cuda`` under HIP,
    ``torch.npu`` on Ascend), wrapped as a devipc ``Stream`` (torch keeps it alive). Not
    on the emulator, whose tensors are CPU tensors without streams (``UnsupportedError``)."""
    if rt.emulated_backend:
        raise error(UnsupportedError, "the emulator's tensors are CPU tensors: torch has no stream for them")
    import torch

    if rt.backend == "hip":
        raw = torch.cuda.current_stream(device).cuda_stream
    else:
        raw = torch.npu.current_stream(device).npu_stream  # torch_npu
    return Stream.wrap(rt, int(raw), device)


def _device_index(t: Any) -> int:
    return t.device.index if t.device.index is not None else 0


def _place(t: Any, buffers: Sequence[SharedBuffer]) -> tuple[Placed, SharedBuffer | None]:
    """Where ``t`` lives, and the devipc buffer holding it (``None``: framework memory)."""
    import torch

    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"expected a torch.Tensor, got {type(t).__name__}")
    storage = t.untyped_storage()
    base, nbytes = storage.data_ptr(), storage.nbytes()
    dtype = str(t.dtype).removeprefix("torch.")
    own = _empty_buffer(storage)
    for buf in [*buffers, *([own] if own is not None else [])]:
        if buf.ptr <= base and base + nbytes <= buf.ptr + len(buf):
            placed = Placed(("buffer", id(buf)), dtype, tuple(t.shape), tuple(t.stride()), t.data_ptr() - buf.ptr)
            return placed, buf
    key = ("external", _device_index(t), base, nbytes)
    return Placed(key, dtype, tuple(t.shape), tuple(t.stride()), t.data_ptr() - base), None


def share(
    rt: Runtime,
    tensors: Iterable[Any],
    peers: Sequence[int] = (),
    buffers: Sequence[SharedBuffer] = (),
    any_process: bool = False,
) -> Descriptor:
    """Describes ``tensors`` (one token per allocation), granted to ``peers`` (or to any
    process: ``any_process=True``). A tensor over a devipc buffer needs the buffer in
    ``buffers``, unless ``empty`` made it."""
    by_key: dict[Any, SharedBuffer] = {}

    def placed() -> Iterable[Placed]:
        for t in tensors:
            p, buf = _place(t, buffers)
            if buf is not None:
                by_key[p.key] = buf
            yield p

    def export(key: Any) -> str:
        if key[0] == "buffer":
            buf = by_key[key]
            token = buf.export(any_process=any_process)
            if peers:
                buf.grant(token, list(peers))
            return token
        _, device, base, nbytes = key
        token = rt.export_external(base, nbytes, device=device, any_process=any_process)
        if peers:
            rt.grant(token, list(peers))
        return token

    return describe(placed(), export)


def close_external(rt: Runtime, tensors: Iterable[Any], buffers: Sequence[SharedBuffer] = ()) -> None:
    """Ends the ``export_external`` exports ``share`` made for ``tensors`` (call it after
    the consumers closed their imports, before torch frees the storages): each block
    once, however many of the storages it holds (see ``close_blocks``)."""
    close_blocks(rt, external_storages(tensors, buffers))


def external_storages(tensors: Iterable[Any], buffers: Sequence[SharedBuffer] = ()) -> list[tuple[int, int]]:
    """``(device, storage address)`` of each of ``tensors`` whose storage is framework
    memory (in no devipc buffer of ``buffers`` nor made by ``empty``): the storages
    ``share`` exports with ``export_external``, and ``close_external`` ends."""
    storages = []
    for t in tensors:
        p, buf = _place(t, buffers)
        if buf is None:
            storages.append((p.key[1], p.key[2]))
    return storages


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
