"""The sending side of ``devipc.ray``: sharing an object's tensors, and ending the
exports when Ray garbage-collects it (deferred while importers still map framework
memory, retried by the reaper thread)."""

from __future__ import annotations

import threading
from typing import Any, Optional

from .. import errors
from .._devipc import Runtime
from ._state import (
    WAIT_TIMEOUT,
    DevipcTransportMetadata,
    _Closing,
    _Export,
    _LOCK,
    _STATE,
    _acquire_signal,
    _device_type,
    _error,
    _log,
    _release_signal,
    _stream,
    runtime,
)


def _extract(obj_id: str, tensors: list) -> DevipcTransportMetadata:
    if not tensors:
        return DevipcTransportMetadata(tensor_meta=[], tensor_device=None)
    import ray
    import torch

    from .. import torch as dtorch

    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise _error(errors.InvalidArgumentError, f"DEVIPC sends torch tensors; item {i} is a {type(t).__name__}")
    rt = runtime()
    want = _device_type(rt)
    for i, t in enumerate(tensors):
        if t.device.type != want:
            where = "devipc's emulator" if rt.emulated_backend else f"the {rt.backend} runtime"
            raise _error(
                errors.InvalidArgumentError,
                f"DEVIPC on {where} sends {want} tensors, but tensor {i} is on {t.device}"
                + (" (on the emulator, allocate tensors with devipc.torch.empty)" if rt.emulated_backend else ""),
            )
    slots: list[Optional[int]] = []
    shared = []
    for t in tensors:
        if t.numel() == 0:
            slots.append(None)
        else:
            slots.append(len(shared))
            shared.append(t)
    tensor_meta = [(t.shape, t.dtype) for t in tensors]
    meta = DevipcTransportMetadata(
        tensor_meta=tensor_meta,
        tensor_device=want,
        slots=tuple(slots),
        node_id=ray.get_runtime_context().get_node_id(),
        backend=rt.backend,
        emulated=rt.emulated_backend,
        sender_pid=rt.process_id,
    )
    if not shared:
        with _LOCK:
            _replace_live(obj_id, _Export(list(tensors), {}, None))
        return meta
    with _LOCK:
        external = _external(shared, dtorch)
        try:
            desc = dtorch.share(rt, shared, any_process=True)
            devices = {_token_device(tok) for tok in desc.allocations}
            if len(devices) != 1:
                raise _error(
                    errors.InvalidArgumentError,
                    f"the tensors of one DEVIPC object must be on one device; these are on devices {sorted(devices)}",
                )
        except errors.DevipcError as e:
            _unexport(rt, external)
            if not (rt.emulated_backend and isinstance(e, errors.VendorError)):
                raise
            raise _error(
                errors.InvalidArgumentError,
                "DEVIPC on devipc's emulator sends tensors in emulated device memory: allocate "
                "them with devipc.torch.empty(devipc.ray.runtime(), shape, dtype) (or in a "
                f"framework block, devipc.testing.framework_malloc); this memory is not ({e})",
            ) from e
        (device,) = devices
        blocks: dict[tuple[int, int], list] = {}
        for t, (dev, ptr) in external:
            block = rt.external_block(ptr, device=dev)
            key = (dev, block[0] if block is not None else ptr)
            blocks.setdefault(key, []).append(t)
        for key in blocks:
            _STATE.refs[key] = _STATE.refs.get(key, 0) + 1
        signal = _acquire_signal(rt, device)
        signal.users += 1
        record = _Export(list(tensors), blocks, signal)
        try:
            generation = signal.signal.post(_stream(rt, device), timeout=WAIT_TIMEOUT)
        except BaseException:
            _end(record, obj_id)
            raise
        _replace_live(obj_id, record)
    meta.descriptor = desc
    meta.signal_token = signal.token
    meta.generation = generation
    return meta


def _unexport(rt: Runtime, external: list) -> None:
    """After a failed share (held under _LOCK): ends the exports it made, those of blocks
    no live or closing object holds."""
    for _, (dev, ptr) in external:
        block = rt.external_block(ptr, device=dev)
        if block is None:
            continue
        key = (dev, block[0])
        if _STATE.refs.get(key) or key in _STATE.closing:
            continue
        try:
            rt.close_external(block[0], device=dev)
        except errors.DevipcError as e:
            _log.warning("devipc.ray: ending the export of block 0x%x after a failed share: %s", block[0], e)


def _token_device(token: str) -> int:
    from .._devipc import token_info

    return int(token_info(token)["device"])


def _external(tensors: list, dtorch: Any) -> list:
    """(tensor, (device, storage address)) for each tensor in framework memory."""
    out = []
    for t in tensors:
        storages = dtorch.external_storages([t])
        if storages:
            out.append((t, storages[0]))
    return out


def _replace_live(obj_id: str, record: _Export) -> None:
    """Makes ``record`` the live export of ``obj_id`` (held under _LOCK); a previous one
    (Ray extracts again when it retries a task) is ended as a garbage collection would."""
    old = _STATE.live.pop(obj_id, None)
    _STATE.live[obj_id] = record
    if old is not None:
        _end(old, obj_id)


def _end(record: _Export, obj_id: str) -> None:
    """Ends a live object's hold (held under _LOCK): its signal reference, and its
    references on framework blocks; a block no live object exports any more is to be
    closed, and keeps the tensors in it until it is."""
    _release_signal(record.signal)
    record.signal = None
    for key, tensors in record.blocks.items():
        left = _STATE.refs.get(key, 0) - 1
        if left > 0:
            _STATE.refs[key] = left
        else:
            _STATE.refs.pop(key, None)
        closing = _STATE.closing.setdefault(key, _Closing())
        closing.tensors.extend(tensors)
        if obj_id not in closing.obj_ids:
            closing.obj_ids.append(obj_id)
    record.blocks = {}
    record.tensors = []


def _still_mapped(e: errors.DevipcError) -> bool:
    return isinstance(e, errors.InvalidArgumentError) and "importers still have" in str(e)


def _retry() -> int:
    """Tries to end the exports of the blocks waiting for it; how many still wait."""
    with _LOCK:
        rt = _STATE.rt
        for key in list(_STATE.closing):
            if _STATE.refs.get(key, 0) > 0:
                continue  # exported again by a live object: ended after it
            device, base = key
            try:
                rt.close_external(base, device=device)
            except errors.DevipcError as e:
                if _still_mapped(e):
                    continue
                _log.warning(
                    "devipc.ray: ending the export of block 0x%x (device %d) of objects %s failed: %s",
                    base, device, _STATE.closing[key].obj_ids, e,
                )
            del _STATE.closing[key]
        return len(_STATE.closing)


def _kick_reaper() -> None:
    """Starts the release thread unless it runs (held under _LOCK)."""
    if _STATE.closing and _STATE.reaper is None:
        _STATE.stop.clear()
        _STATE.reaper = threading.Thread(target=_reap, name="devipc-ray-release", daemon=True)
        _STATE.reaper.start()


def _reap() -> None:
    delay = 0.005
    while not _STATE.stop.wait(delay):
        try:
            _retry()
        except Exception:  # noqa: BLE001 - the thread must outlive any one failure
            _log.exception("devipc.ray: the deferred release failed")
        with _LOCK:
            if not _STATE.closing or _STATE.reaper is not threading.current_thread():
                if _STATE.reaper is threading.current_thread():
                    _STATE.reaper = None
                return
        delay = min(delay * 2, 1.0)
    with _LOCK:
        if _STATE.reaper is threading.current_thread():
            _STATE.reaper = None


def _garbage_collect(obj_id: str) -> None:
    with _LOCK:
        record = _STATE.live.pop(obj_id, None)
        if record is None:
            return
        _end(record, obj_id)
        if _STATE.closing:
            _retry()
            _kick_reaper()


def _housekeeping() -> None:
    """The retry made on every transport call, without waiting."""
    if _STATE.closing:
        with _LOCK:
            if _STATE.rt is not None and _STATE.closing:
                _retry()
                _kick_reaper()
