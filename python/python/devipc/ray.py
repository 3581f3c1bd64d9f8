"""A Ray Direct Transport over devipc: torch tensors go from one actor to another on the
same node by sharing device memory (no copy through Ray's object store).

    import devipc.ray
    devipc.ray.register()                    # once, in the driver, before the actors

    @ray.remote
    class Producer:
        @ray.method(tensor_transport="DEVIPC")
        def weights(self):
            return self.w                    # a torch tensor (or a list of them)

A reference returned by ``weights`` passed to another actor's method arrives there as the
sender's tensors: zero-copy views of the sender's memory, or, where Ray passes target
buffers (``ray.experimental.set_target_for_ref``), copies into them. Tensors are ``cuda``
tensors on ROCm, ``npu`` tensors on Ascend and, on devipc's emulator, ``cpu`` tensors in
emulated device memory (``devipc.torch.empty``). ``register`` needs ``ray`` and
``torch``; this module imports ``ray`` when it is imported.

Each process uses one ``Runtime.from_env()`` (``DEVIPC_BACKEND``; actors inherit the
driver's environment, or take it from ``runtime_env={"env_vars": ...}``), made on first
use; ``runtime()`` returns it and ``shutdown()`` ends it. Ray registers the transport in
each actor asynchronously after the actor started: an actor that names the transport
itself (``method.options(tensor_transport="DEVIPC")``, to own the reference and, say,
``ray.get`` it into target buffers) calls ``register()`` first.

The sender (``extract_tensor_transport_metadata``, run by Ray when the method returns)
shares the tensors with ``devipc.torch.share``: one token per allocation, exported for
*any process* of this user (``any_process=True``), because a one-sided transport does not
know which process will receive (Ray may hand the reference to any actor later), so it
cannot grant a pid. It then posts a generation of a devipc ``Signal`` on its current
stream (torch's current stream on a device; a devipc stream of its own on the emulator),
and the receiver's stream waits for that generation before it touches the memory: the
receiver never sees the tensors before the sender's work that produced them. Signals are
reused: the sender posts on a signal of its pool whose ring of events has room (an
object that is never received must not hold up later posts), and a receiver keeps its
imports of the last ``SIGNAL_CACHE`` signals open. The metadata
(``DevipcTransportMetadata``) carries the tensor descriptor (tokens, per-tensor dtype,
shape, strides and offset), the signal token and generation and the sender's Ray node;
each token carries its device's physical identity, which the receiver maps to its own
device index (``Runtime.local_device_of``). On the emulator a ``cpu`` tensor does not
say which emulated device holds it: a ``devipc.torch.empty`` tensor's buffer does,
framework memory is taken as device 0's.

Lifetime, the choice this module makes: a receiver's zero-copy tensor stays valid for as
long as the receiver keeps it, also after the sender's object reference went out of
scope. When Ray garbage-collects the object on the sender (``garbage_collect``), the
transport ends what it can at once and defers the rest, never blocking Ray's thread:

- tensors in devipc buffers need nothing: devipc defers a buffer's free until its
  importers closed;
- framework memory (torch's own allocator, exported with ``Runtime.export_external``)
  must stay exported, and unused by torch, until every importer closed it (devipc
  refuses ``close_external`` before: "importers still have the block ... mapped"). So
  the transport keeps the object's tensors referenced (torch cannot reuse their memory)
  and retries the close later: on later transport calls and from a daemon thread
  (``devipc-ray-release``) with a backoff from 5 ms to 1 s. A block that several live
  objects export is ended once, after the last of them.

``live_exports()`` and ``pending_exports()`` show the objects still exported and those
whose release is deferred.

A receiver on another Ray node than the sender gets ``devipc.errors.UnsupportedError``
(the request is well formed; devipc does not cross nodes) naming Ray's transports that
do (NIXL, collective groups). ``abort_transport``
(Ray calls it when a transfer fails or times out) closes the receiver's imports of that
object that a receive in progress had opened; the receive raises ``ClosedError``.
Errors are devipc's own (``devipc.errors``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ray.experimental.rdt.tensor_transport_manager import (
    CommunicatorMetadata,
    TensorTransportManager,
    TensorTransportMetadata,
)

from . import errors
from ._devipc import ImportedBuffer, Runtime, Signal, Span, Stream, _error_table
from .tensors import Descriptor

__all__ = [
    "DEFAULT_NAME",
    "DEVICES",
    "SIGNAL_CACHE",
    "WAIT_TIMEOUT",
    "DevipcCommunicatorMetadata",
    "DevipcTransport",
    "DevipcTransportMetadata",
    "live_exports",
    "pending_exports",
    "register",
    "runtime",
    "shutdown",
]

#: The transport's default name, as methods spell it: ``@ray.method(tensor_transport="DEVIPC")``.
DEFAULT_NAME = "DEVIPC"

#: The torch device types the transport registers for.
DEVICES = ["cpu", "cuda", "npu"]

#: Seconds a receiver waits for the sender's post of its generation (it was made before
#: the metadata existed, so in practice the wait returns at once), and a sender for a
#: signal slot.
WAIT_TIMEOUT = 60.0

#: How many imported signals a receiver keeps open for the next objects of the same
#: senders (a sender reuses its signals, and an import and close cost milliseconds on
#: the emulator); the least recently used is closed first.
SIGNAL_CACHE = 16

# A signal keeps a ring of four interprocess events: a post that would reuse the slot of
# a generation no wait was issued for blocks (devipc's Signal.post). The pool posts on a
# signal only while that cannot happen.
_RING = 4

_log = logging.getLogger("devipc.ray")

_KINDS = {row["class"]: row["kind"] for row in _error_table}


def _error(cls: type[errors.DevipcError], text: str) -> errors.DevipcError:
    """A devipc error of class ``cls`` made here, with the attributes the extension's
    errors have."""
    e = cls(text)
    e.kind = _KINDS.get(cls.__name__, "invalid_argument")
    e.backend = e.api = e.code = e.name = None
    e.message = text
    e.details = {}
    return e


@dataclass
class DevipcCommunicatorMetadata(CommunicatorMetadata):
    """Nothing: a one-sided transport needs no communicator."""


@dataclass
class DevipcTransportMetadata(TensorTransportMetadata):
    """What the receiver needs, made by the sender: Ray's ``tensor_meta`` (shape, dtype)
    and ``tensor_device``, and

    - ``descriptor``: the devipc tensor descriptor of the tensors that hold bytes (one
      token per allocation; dtype, shape, strides and byte offset per tensor);
    - ``slots``: per tensor, its index in ``descriptor.tensors``, or ``None`` for a tensor
      of 0 elements (made anew by the receiver: nothing to share);
    - ``signal_token`` / ``generation``: the signal generation the sender posted after
      the work that produced the tensors;
    - ``node_id``: the sender's Ray node; ``backend`` / ``emulated``: its runtime;
      ``sender_pid``: its process id (for messages).
    """

    descriptor: Optional[Descriptor] = None
    slots: tuple = ()
    signal_token: Optional[str] = None
    generation: int = 0
    node_id: Optional[str] = None
    backend: Optional[str] = None
    emulated: bool = False
    sender_pid: int = 0


# ---------------------------------------------------------------------------------------
# Per-process state


@dataclass
class _PooledSignal:
    signal: Signal
    token: str
    device: int
    users: int = 0  # live objects whose metadata names it

    def postable(self) -> bool:
        posted, waited = self.signal.generations
        return posted - waited < _RING


@dataclass
class _Export:
    """A live object: its tensors (Ray holds them too), the framework blocks it holds a
    reference on, with the tensors in each, and its signal."""

    tensors: list
    blocks: dict  # (device, block base) -> [tensors in it]
    signal: Optional[_PooledSignal]


@dataclass
class _Closing:
    """A framework block no live object exports any more, whose export could not be
    ended yet: the tensors that keep its memory from torch, and the objects they came
    from."""

    tensors: list = field(default_factory=list)
    obj_ids: list = field(default_factory=list)


@dataclass
class _Receive:
    """A receive in progress, for ``abort_transport``."""

    obj_id: str
    imports: list = field(default_factory=list)
    signal: Optional[Signal] = None
    aborted: bool = False


class _State:
    def __init__(self) -> None:
        self.rt: Optional[Runtime] = None
        self.streams: dict[int, Stream] = {}
        self.signals: dict[int, list[_PooledSignal]] = {}
        self.live: dict[str, _Export] = {}
        self.refs: dict[tuple[int, int], int] = {}
        self.closing: dict[tuple[int, int], _Closing] = {}
        self.receiving: dict[str, list[_Receive]] = {}
        self.imported: OrderedDict[str, Signal] = OrderedDict()
        self.reaper: Optional[threading.Thread] = None
        self.stop = threading.Event()


_LOCK = threading.RLock()
_STATE = _State()
# Tensors of blocks still exported when ``shutdown`` gave up: kept for the life of the
# process, so that torch never reuses memory another process may still map.
_ABANDONED: list = []


def runtime() -> Runtime:
    """This process's devipc runtime for the transport: ``Runtime.from_env()`` on first
    use (``DEVIPC_BACKEND``), the same one afterwards until ``shutdown``. Allocate the
    tensors to send with it (``devipc.torch.empty(devipc.ray.runtime(), ...)``)."""
    with _LOCK:
        if _STATE.rt is None:
            _STATE.rt = Runtime.from_env()
        return _STATE.rt


def _device_type(rt: Runtime) -> str:
    if rt.emulated_backend:
        return "cpu"
    return {"hip": "cuda", "ascend": "npu"}.get(rt.backend, rt.backend)


def _stream(rt: Runtime, device: int) -> Stream:
    """The stream whose order the transport follows on ``device``: torch's current
    stream on a device, a devipc stream of the transport's own on the emulator (where
    the tensors' consumer is the host)."""
    if rt.emulated_backend:
        with _LOCK:
            stream = _STATE.streams.get(device)
            if stream is None:
                stream = _STATE.streams[device] = rt.create_stream(device)
            return stream
    import torch

    if rt.backend == "hip":
        raw = torch.cuda.current_stream(device).cuda_stream
    else:
        raw = torch.npu.current_stream(device).npu_stream  # torch_npu
    return Stream.wrap(rt, int(raw), device)


def _acquire_signal(rt: Runtime, device: int) -> _PooledSignal:
    """A signal of ``device`` that can take a post without blocking (held under _LOCK)."""
    pool = _STATE.signals.setdefault(device, [])
    for p in pool:
        if p.postable():
            return p
    signal = rt.create_signal(device)
    p = _PooledSignal(signal, signal.export(any_process=True), device)
    pool.append(p)
    return p


def _release_signal(p: Optional[_PooledSignal]) -> None:
    """One object fewer names ``p``; a signal no object names and that cannot take a post
    any more (generations never waited for) is closed (held under _LOCK)."""
    if p is None:
        return
    p.users -= 1
    if p.users <= 0 and not p.postable():
        _STATE.signals[p.device].remove(p)
        p.signal.close()


# ---------------------------------------------------------------------------------------
# Sender


def _extract(obj_id: str, tensors: list) -> DevipcTransportMetadata:
    if not tensors:
        return DevipcTransportMetadata(tensor_meta=[], tensor_device=None)
    import ray
    import torch

    from . import torch as dtorch

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
    from ._devipc import token_info

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


# ---------------------------------------------------------------------------------------
# Receiver


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


# ---------------------------------------------------------------------------------------
# The transport


class DevipcTransport(TensorTransportManager):
    """The Ray tensor transport (``TensorTransportManager``) over devipc; one-sided: the
    receiver imports the sender's memory, the sender takes no part in a transfer.
    Register it with ``register()``; Ray makes one instance per process."""

    def tensor_transport_backend(self) -> str:
        """The transport's default name, ``"DEVIPC"``."""
        return DEFAULT_NAME

    @staticmethod
    def is_one_sided() -> bool:
        """True: only the receiver acts in a transfer."""
        return True

    @staticmethod
    def can_abort_transport() -> bool:
        """True: ``abort_transport`` closes a receive's imports; nothing blocks on a peer."""
        return True

    def actor_has_tensor_transport(self, actor: Any) -> bool:
        """True: any actor can use it (one that cannot start a devipc runtime fails in
        the transfer, with devipc's error)."""
        return True

    def extract_tensor_transport_metadata(self, obj_id: str, rdt_object: list) -> DevipcTransportMetadata:
        """Sender: exports the tensors (any process may import them), posts a signal
        generation after the work queued so far on the current stream, and returns the
        metadata; the exports last until ``garbage_collect``."""
        _housekeeping()
        return _extract(obj_id, list(rdt_object))

    def get_communicator_metadata(self, src_actor: Any, dst_actor: Any, backend: Optional[str] = None) -> DevipcCommunicatorMetadata:
        """Empty: no communicator."""
        return DevipcCommunicatorMetadata()

    def recv_multiple_tensors(
        self,
        obj_id: str,
        tensor_transport_metadata: TensorTransportMetadata,
        communicator_metadata: CommunicatorMetadata,
        target_buffers: Optional[list] = None,
    ) -> list:
        """Receiver: the sender's tensors, as zero-copy views (each keeps its import
        alive), or copied into ``target_buffers`` (then the imports are closed); in both
        cases ordered after the sender's post."""
        return _recv(obj_id, tensor_transport_metadata, target_buffers)

    def send_multiple_tensors(self, tensors: list, tensor_transport_metadata: Any, communicator_metadata: Any) -> None:
        """Never called for a one-sided transport: ``UnsupportedError``."""
        raise _error(errors.UnsupportedError, "DEVIPC is one-sided: the receiver imports, nothing is sent")

    def garbage_collect(self, obj_id: str, tensor_transport_meta: Any, tensors: list) -> None:
        """Sender: ends the object's exports, or defers the ends that importers still
        prevent (see the module's docstring); never blocks."""
        _garbage_collect(obj_id)

    def abort_transport(self, obj_id: str, communicator_metadata: Any) -> None:
        """Closes the imports a receive of ``obj_id`` in progress opened (it raises
        ``ClosedError``); nothing where no receive of it is under way."""
        _abort(obj_id)


def register(name: str = DEFAULT_NAME) -> str:
    """Registers the transport with Ray under ``name`` (upper-cased, as Ray does) for
    ``torch.Tensor`` on ``cpu`` (the emulator), ``cuda`` (ROCm) and ``npu`` (Ascend) and
    returns the name. Call it in the driver before defining the actor classes whose
    methods name it (``@ray.method(tensor_transport="DEVIPC")`` checks the name) and
    before creating the actors; Ray then registers it in each actor, asynchronously,
    after the actor started. An actor that names the transport itself (it calls
    ``method.options(tensor_transport="DEVIPC")`` and owns the reference, e.g. to
    ``ray.get`` it into target buffers) calls ``register()`` too, first. Registering
    again under the same name is a no-op."""
    import torch
    from ray.experimental import register_tensor_transport
    from ray.experimental.rdt import util

    name = name.upper()
    known = getattr(util, "transport_manager_info", {}).get(name)
    if known is not None:
        if known.transport_manager_class is DevipcTransport:
            return name
        raise _error(errors.InvalidArgumentError, f"Ray already has a tensor transport named {name}")
    register_tensor_transport(name, list(DEVICES), DevipcTransport, torch.Tensor)
    return name


def live_exports() -> list[str]:
    """The objects this process sent whose exports are live (Ray has not garbage-collected
    them yet)."""
    with _LOCK:
        return sorted(_STATE.live)


def pending_exports() -> list[str]:
    """The objects this process sent that Ray garbage-collected, but whose framework
    memory is still exported because another process maps it: the transport retries,
    and keeps their tensors meanwhile."""
    with _LOCK:
        return sorted({o for c in _STATE.closing.values() for o in c.obj_ids})


def shutdown(timeout: float = 10.0) -> list[str]:
    """Ends this process's use of the transport: aborts the receives in progress, ends
    every export (live ones too: later receives of them fail), waiting at most
    ``timeout`` seconds for importers to close, closes the signals (its own and the
    imports it kept) and the runtime.
    Returns the objects whose exports could not be ended in time (their memory stays
    exported, and referenced, for the life of the process). The next transport call
    starts a new runtime."""
    with _LOCK:
        receiving = list(_STATE.receiving)
    for obj_id in receiving:
        _abort(obj_id)
    with _LOCK:
        for obj_id in list(_STATE.live):
            _end(_STATE.live.pop(obj_id), obj_id)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        with _LOCK:
            left = _retry() if _STATE.rt is not None else 0
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 0.2)
    _STATE.stop.set()
    reaper = _STATE.reaper
    if reaper is not None and reaper is not threading.current_thread():
        reaper.join(timeout=5)
    with _LOCK:
        stuck = sorted({o for c in _STATE.closing.values() for o in c.obj_ids})
        for c in _STATE.closing.values():
            _ABANDONED.extend(c.tensors)
        if stuck:
            _log.warning("devipc.ray: shutdown left objects %s exported: importers still map them", stuck)
        signals = [p.signal for pool in _STATE.signals.values() for p in pool]
        for signal in [*signals, *_STATE.imported.values()]:
            try:
                signal.close()
            except errors.DevipcError as e:
                _log.warning("devipc.ray: closing a signal failed: %s", e)
        rt = _STATE.rt
        _STATE.__init__()
        if rt is not None:
            rt.close()
    return stuck

