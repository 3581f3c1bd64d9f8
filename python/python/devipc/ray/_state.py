"""Per-process state of ``devipc.ray``: its constants, the metadata Ray carries, the
runtime, the streams whose order the transport follows, and the sender's pool of signals."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Optional

from ray.experimental.rdt.tensor_transport_manager import (
    CommunicatorMetadata,
    TensorTransportMetadata,
)

from .. import errors
from .._devipc import Runtime, Signal, Stream
from .. import torch as torch_front
from .._pyerrors import error
from ..tensors import Descriptor

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

def _error(cls: type[errors.DevipcError], text: str) -> errors.DevipcError:
    """A devipc error of class ``cls`` made here, with the attributes the extension's
    errors have."""
    return error(cls, text)


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
    return torch_front.device_type(rt)


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
    return torch_front.current_stream(rt, device)


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
