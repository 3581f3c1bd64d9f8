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

import threading
import time
from typing import Any, Optional

from ray.experimental.rdt.tensor_transport_manager import (
    CommunicatorMetadata,
    TensorTransportManager,
    TensorTransportMetadata,
)

from .. import errors
from ._recv import _abort, _recv
from ._send import _end, _extract, _garbage_collect, _housekeeping, _retry
from ._state import (
    DEFAULT_NAME,
    DEVICES,
    SIGNAL_CACHE,
    WAIT_TIMEOUT,
    DevipcCommunicatorMetadata,
    DevipcTransportMetadata,
    _ABANDONED,
    _LOCK,
    _STATE,
    _error,
    _log,
    runtime,
)

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
