"""The receiving side of ``devipc.ray``: zero-copy views of the sender's memory or copies
into target buffers, ordered after the sender's signal generation; and abort."""

from __future__ import annotations

from typing import Optional, Sequence

from ray.experimental.rdt.tensor_transport_manager import TensorTransportMetadata

from .. import errors
from .._devipc import ImportedBuffer, Runtime, Signal, Span
from ..tensors import Descriptor
from ._send import _housekeeping
from ._state import (
    SIGNAL_CACHE,
    WAIT_TIMEOUT,
    DevipcTransportMetadata,
    _LOCK,
    _Receive,
    _STATE,
    _device_type,
    _error,
    _log,
    _stream,
    runtime,
)


def _check_node(obj_id: str, meta: DevipcTransportMetadata) -> None:
    import ray

    here = ray.get_runtime_context().get_node_id()
    if meta.node_id is not None and meta.node_id != here:
        raise _error(
            errors.UnsupportedError,
            f"DEVIPC shares device memory between the processes of one node, but object "
            f"{obj_id} was made on Ray node {meta.node_id} and this process runs on node "
            f"{here}. Across nodes, use one of Ray's transports that cross nodes: NIXL "
            f'(tensor_transport="nixl"), or a collective group (tensor_transport="nccl" or '
            f'"gloo", after ray.experimental.collective.create_collective_group)',
        )


def _recv(
    obj_id: str,
    meta: TensorTransportMetadata,
    target_buffers: Optional[list],
) -> list:
    if not isinstance(meta, DevipcTransportMetadata):
        raise _error(
            errors.InvalidArgumentError,
            f"DEVIPC received metadata of another transport ({type(meta).__name__})",
        )
    count = len(meta.tensor_meta)
    if target_buffers is not None and len(target_buffers) != count:
        raise _error(
            errors.InvalidArgumentError,
            f"object {obj_id} holds {count} tensors, but {len(target_buffers)} target buffers were given",
        )
    if count == 0:
        return []
    _check_node(obj_id, meta)
    import torch

    rt = runtime()
    _housekeeping()
    if meta.emulated != rt.emulated_backend or meta.backend != rt.backend:
        raise _error(
            errors.BackendMismatchError,
            f"object {obj_id} was sent from a {'emulated ' if meta.emulated else ''}{meta.backend} "
            f"runtime, this process runs {rt.info()['description']}",
        )
    desc = meta.descriptor if meta.descriptor is not None else Descriptor((), ())
    desc.check()
    if len(meta.slots) != count:
        raise _error(errors.InvalidArgumentError, f"metadata of object {obj_id} names {len(meta.slots)} slots for {count} tensors")
    receive = _Receive(obj_id)
    with _LOCK:
        _STATE.receiving.setdefault(obj_id, []).append(receive)
    try:
        device = 0
        if desc.allocations:
            devices = []
            for token in (*desc.allocations, meta.signal_token):
                local = rt.local_device_of(token)
                if local is None:
                    raise _error(
                        errors.DeviceNotVisibleError,
                        f"the device of object {obj_id} (process {meta.sender_pid}) is not visible "
                        f"in this process: run the receiver with that device in its visibility mask "
                        f"({', '.join(_MASKS)})",
                    )
                devices.append(local)
            device = devices[0]
            for token, local in zip(desc.allocations, devices):
                _opened(receive, rt.import_buffer(token, local))
            signal = _take_signal(rt, meta.signal_token, devices[-1])
            with _LOCK:
                receive.signal = signal
                if receive.aborted:
                    signal.close()
            _check_aborted(receive)
            stream = _stream(rt, device)
            signal.wait_for(stream, meta.generation, timeout=WAIT_TIMEOUT)
            with _LOCK:
                receive.signal = None
            _keep_signal(meta.signal_token, signal)
            if rt.emulated_backend:
                stream.synchronize()  # the host reads the tensors next
            _check_aborted(receive)
        imports = receive.imports
        if target_buffers is None:
            out = []
            for slot, (shape, dtype) in zip(meta.slots, meta.tensor_meta):
                if slot is None:
                    out.append(torch.empty(shape, dtype=dtype, device=_torch_device(rt, device)))
                else:
                    spec = desc.tensors[slot]
                    view = imports[spec.alloc].view(spec.dtype, list(spec.shape), list(spec.strides), spec.offset)
                    out.append(torch.from_dlpack(view))
            return out
        _copy_into(rt, obj_id, meta, desc, imports, target_buffers, device)
        for imp in imports:
            imp.close()
        return list(target_buffers)
    except errors.DevipcError as e:
        _close_quietly(receive)
        if receive.aborted and "was aborted" not in str(e):
            raise _error(errors.ClosedError, f"the DEVIPC receive of object {obj_id} was aborted") from e
        raise
    except BaseException:
        _close_quietly(receive)
        raise
    finally:
        with _LOCK:
            left = _STATE.receiving.get(obj_id, [])
            if receive in left:
                left.remove(receive)
            if not left:
                _STATE.receiving.pop(obj_id, None)


_MASKS = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")


def _opened(receive: _Receive, imp: ImportedBuffer) -> None:
    with _LOCK:
        receive.imports.append(imp)
        aborted = receive.aborted
    if aborted:
        imp.close()
        _check_aborted(receive)


def _take_signal(rt: Runtime, token: str, device: int) -> Signal:
    """The signal of ``token``: a cached import (taken out of the cache while in use), or
    a new one."""
    with _LOCK:
        signal = _STATE.imported.pop(token, None)
    if signal is not None and not signal.closed:
        return signal
    return rt.import_signal(token, device)


def _keep_signal(token: str, signal: Signal) -> None:
    """Returns an imported signal to the cache; closes what falls out of it."""
    out = []
    with _LOCK:
        if signal.closed:
            return
        if token in _STATE.imported:
            out.append(signal)
        else:
            _STATE.imported[token] = signal
            while len(_STATE.imported) > SIGNAL_CACHE:
                out.append(_STATE.imported.popitem(last=False)[1])
    for s in out:
        try:
            s.close()
        except errors.DevipcError as e:
            _log.debug("devipc.ray: closing an imported signal: %s", e)


def _close_quietly(receive: _Receive) -> None:
    """Closes what a failed receive opened (nothing of it was handed out)."""
    for obj in [*receive.imports, receive.signal]:
        if obj is not None and not obj.closed:
            try:
                obj.close()
            except errors.DevipcError as e:
                _log.debug("devipc.ray: closing after a failed receive of %s: %s", receive.obj_id, e)


def _check_aborted(receive: _Receive) -> None:
    if receive.aborted:
        raise _error(errors.ClosedError, f"the DEVIPC receive of object {receive.obj_id} was aborted")


def _torch_device(rt: Runtime, device: int) -> str:
    kind = _device_type(rt)
    return kind if kind == "cpu" else f"{kind}:{device}"


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def _copy_into(
    rt: Runtime,
    obj_id: str,
    meta: DevipcTransportMetadata,
    desc: Descriptor,
    imports: list,
    targets: list,
    device: int,
) -> None:
    """Copies each tensor of the object into its target buffer, in stream order after
    the sender's post, and waits for the copies: devipc's copies for tensors laid out
    contiguously, torch's from a zero-copy view for the others."""
    import torch

    want = _device_type(rt)
    pairs, strided = [], []
    for i, (target, slot, (shape, dtype)) in enumerate(zip(targets, meta.slots, meta.tensor_meta)):
        if not isinstance(target, torch.Tensor):
            raise _error(errors.InvalidArgumentError, f"target buffer {i} is a {type(target).__name__}, not a torch.Tensor")
        if tuple(target.shape) != tuple(shape) or target.dtype != dtype or not target.is_contiguous():
            raise _error(
                errors.InvalidArgumentError,
                f"target buffer {i} is {tuple(target.shape)} {target.dtype}"
                f"{'' if target.is_contiguous() else ' (not contiguous)'}; tensor {i} of object "
                f"{obj_id} is {tuple(shape)} {dtype}: a target must match it and be contiguous",
            )
        if target.device.type != want:
            raise _error(
                errors.UnsupportedError,
                f"target buffer {i} is on {target.device}; DEVIPC receives into {want} tensors here",
            )
        if slot is None:
            continue
        spec = desc.tensors[slot]
        if tuple(spec.strides) == _contiguous_strides(spec.shape):
            nbytes = target.numel() * target.element_size()
            dst_device = device if rt.emulated_backend else target.device.index or 0
            dst = Span.external(rt, target.data_ptr(), nbytes, dst_device)
            pairs.append((dst, imports[spec.alloc].span(spec.offset, spec.offset + nbytes), target, spec))
        else:
            strided.append((target, spec))
    stream = _stream(rt, device)
    if pairs:
        try:
            request = stream.copy_batch([(d, s) for d, s, _, _ in pairs])
        except errors.CopyError:
            if not rt.emulated_backend:
                raise
            # The emulator's host memory (a plain cpu tensor) is no device memory, and the
            # emulated Ascend runtime refuses device-to-device copies into it: the host
            # copies those, out of the zero-copy views.
            stream.synchronize()
            strided.extend((t, spec) for _, _, t, spec in pairs)
        else:
            request.wait(WAIT_TIMEOUT)
    for target, spec in strided:
        view = torch.from_dlpack(imports[spec.alloc].view(spec.dtype, list(spec.shape), list(spec.strides), spec.offset))
        target.copy_(view)
        del view
    if strided and not rt.emulated_backend:
        if rt.backend == "hip":
            torch.cuda.current_stream(device).synchronize()
        else:
            torch.npu.current_stream(device).synchronize()


def _abort(obj_id: str) -> None:
    with _LOCK:
        receives = list(_STATE.receiving.get(obj_id, []))
        for r in receives:
            r.aborted = True
    for r in receives:
        # An import the receive already made views of stays open (BufferInUseError): the
        # receive is past the point of no return and hands the views out.
        _close_quietly(r)
