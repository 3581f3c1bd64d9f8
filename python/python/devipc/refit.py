"""Weight refit: one producer streams named tensors to N consumers, step after step,
through a persistent staging area of K buckets in device memory, shared once.

Why: RL trainers move their weights into the rollout engines every step. Per-tensor IPC
handles are slow (one vendor import per tensor per step), a fresh bucket per step wastes
memory, and a reused bucket races unless something orders the producer's next write after
every consumer's read. This channel orders it, on the streams, without host synchronisation:

- the producer allocates ``buckets`` x ``bucket_bytes`` of staging memory and, per consumer,
  a *filled* and an *acked* signal (``Signal.post`` / ``Signal.wait_for``, generations);
- per bucket, the producer packs tensors with stream-ordered copies (``Stream.copy_batch``
  from the framework's memory, VMM memory included: the sources are only read by copies,
  never exported), posts *filled* on its stream and sends the bucket's contents (names,
  dtypes, shapes, offsets) to each consumer;
- a consumer's stream waits for that generation, copies out (or the caller reads views), and
  the consumer posts *acked* on its stream;
- the producer refills a bucket only after its stream waited for every live consumer's ack
  of that bucket's previous fill, so the next write cannot overtake a read (the race that
  makes slime allocate a fresh bucket every step cannot happen).

Fill ``f`` (1, 2, ... over the channel's life) uses bucket ``(f - 1) % K`` and is generation
``f`` of every signal. A tensor larger than what is left of a bucket is split across
buckets; ``Consumer.receive`` puts the pieces back together.

Rendezvous and liveness: the producer listens on a Unix socket at ``path`` (the control
channel, one connection per consumer, credentials checked with ``SO_PEERCRED``) and hands
the staging area and the signals out through devipc's rendezvous at ``path + ".share"``
(``SharedBuffer.share``: uid check, grant, tokens). The control connection carries each
bucket's description and tells each side when the other is gone: a consumer that exits or
is killed (``kill -9`` included, in any pid namespace) closes it, and the producer, which
watches it whenever it waits for an ack, drops that consumer, finishes the step for the
others and then raises ``PeerLostError`` naming it; a consumer waiting for the next bucket
of a producer that died gets ``PeerLostError``. Nobody hangs on a dead peer.

Sources and destinations are contiguous: torch tensors in the runtime's device memory
(``cuda`` under HIP, ``npu`` on Ascend; on the emulator ``cpu`` tensors over emulated device
memory, e.g. ``devipc.testing.framework_malloc``), devipc buffers and spans (copied with
``Stream.copy_batch``), or numpy arrays, which are host memory (copied in and out with
``Stream.write`` / ``Stream.read``). A signal carries at most 4 generations in flight, so
``buckets`` is 1 to 4.
"""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import struct
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping

from ._devipc import Buffer, Runtime, ShareOptions, Signal, Span, Stream, _binding_error
from .errors import DevipcError, InvalidArgumentError, PeerLostError, TimedOutError

#: Byte alignment of every entry in a bucket.
ALIGN = 256
#: The most buckets a channel may have: the depth of a signal's ring of events.
MAX_BUCKETS = 4
#: The control protocol's version.
PROTOCOL = 1
#: How often (seconds) a waiting side looks at its peers' control connections.
_SLICE = 0.1
#: The longest one consumer's set-up may take in ``Producer.accept`` before it is dropped.
_SETUP = 10.0
#: The longest control message accepted (a bucket of many small tensors is ~100 bytes each).
_MAX_MESSAGE = 64 << 20


def _peer_lost(text: str, **details: Any) -> DevipcError:
    return _binding_error("peer_lost", text, details)


def _deadline(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    if not timeout >= 0:
        raise InvalidArgumentError(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    return time.monotonic() + timeout


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _slice(deadline: float | None) -> float:
    left = _left(deadline)
    return _SLICE if left is None else min(_SLICE, left)


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


class _Line:
    """One control connection: newline-separated JSON objects, both ways."""

    def __init__(self, sock: socket.socket, peer: str):
        self.sock = sock
        self.peer = peer
        self.pid, self.uid, _ = _peer_credentials(sock)
        self._buf = b""

    def send(self, msg: dict[str, Any]) -> None:
        """Sends `msg`; a peer that is gone is ``PeerLostError``."""
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        try:
            self.sock.sendall(data, socket.MSG_NOSIGNAL)
        except OSError as e:
            raise _peer_lost(f"{self.peer} (pid {self.pid}) is gone: {e}", pid=self.pid) from None

    def _fill(self, wait: float) -> bool:
        """Reads what arrived within `wait` seconds; False: nothing arrived. The peer's end
        closed is ``PeerLostError``."""
        ready, _, _ = select.select([self.sock], [], [], wait)
        if not ready:
            return False
        try:
            chunk = self.sock.recv(1 << 20)
        except OSError as e:
            raise _peer_lost(f"{self.peer} (pid {self.pid}) is gone: {e}", pid=self.pid) from None
        if not chunk:
            raise _peer_lost(
                f"{self.peer} (pid {self.pid}) is gone: it closed the channel, exited or was killed",
                pid=self.pid,
            )
        self._buf += chunk
        if len(self._buf) > _MAX_MESSAGE and b"\n" not in self._buf:
            raise InvalidArgumentError(f"{self.peer} sent a control message over {_MAX_MESSAGE} bytes")
        return True

    def recv(self, deadline: float | None, waiting_for: str) -> dict[str, Any]:
        """The next message, by `deadline` (``TimedOutError``)."""
        while b"\n" not in self._buf:
            if not self._fill(_slice(deadline)) and _expired(deadline):
                raise TimedOutError(f"timed out waiting for {waiting_for} from {self.peer}")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError as e:
            raise InvalidArgumentError(f"{self.peer} sent a malformed control message: {e}") from None
        if not isinstance(msg, dict):
            raise InvalidArgumentError(f"{self.peer} sent a control message that is not an object")
        if msg.get("bye"):
            raise _peer_lost(f"{self.peer} (pid {self.pid}) closed the channel", pid=self.pid, closed=True)
        return msg

    def poll_gone(self) -> bool:
        """Whether the peer is gone (its end closed, or it said goodbye), without waiting."""
        try:
            while self._fill(0):
                pass
        except DevipcError:
            return True
        # After "ready", the only thing a consumer says is goodbye.
        return b"bye" in self._buf

    def close(self) -> None:
        self.sock.close()


def _is_int(x: Any, low: int = 0) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


# --------------------------------------------------------------------------------------
# Tensors as spans of device memory.


def _dtype_name(obj: Any) -> str:
    dtype = getattr(obj, "dtype", None)
    if dtype is None:
        return "uint8"
    return str(getattr(dtype, "name", dtype)).removeprefix("torch.")


def _shape(obj: Any) -> list[int]:
    shape = getattr(obj, "shape", None)
    return [len(obj)] if shape is None else [int(d) for d in shape]


def _device_type(rt: Runtime) -> str:
    if rt.emulated_backend:
        return "cpu"
    return {"hip": "cuda", "ascend": "npu"}.get(rt.backend, rt.backend)


class _Host:
    """Host memory (a numpy array): copied with ``Stream.write`` / ``Stream.read``."""

    def __init__(self, array: Any, start: int = 0, stop: int | None = None):
        self.array = array
        self.start = start
        self.stop = array.nbytes if stop is None else stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, s: slice) -> "_Host":
        return _Host(self.array, self.start + s.start, self.start + s.stop)

    def bytes(self) -> memoryview:
        return memoryview(self.array).cast("B")[self.start : self.stop]


def _span_of(rt: Runtime, obj: Any, device: int, what: str, writable: bool = False) -> Span | _Host | None:
    """`obj`'s memory (None for 0 bytes): a devipc span or buffer, a contiguous torch
    tensor of the runtime's device type (device memory), or a C-contiguous numpy array
    (host memory, copied in and out with ``Stream.write`` / ``Stream.read``)."""
    if isinstance(obj, Span):
        return obj
    if isinstance(obj, Buffer):
        return obj.span() if len(obj) else None
    module = type(obj).__module__
    if module.startswith("torch") and hasattr(obj, "data_ptr"):
        expected = _device_type(rt)
        if obj.device.type != expected:
            raise InvalidArgumentError(
                f"{what} is a {obj.device.type} tensor; this {rt.backend} runtime"
                f"{' (emulated)' if rt.emulated_backend else ''} copies {expected} tensors"
            )
        if not obj.is_contiguous():
            raise InvalidArgumentError(f"{what} is not contiguous (pass .contiguous())")
        nbytes = obj.numel() * obj.element_size()
        index = obj.device.index if obj.device.index is not None else device
        return Span.external(rt, obj.data_ptr(), nbytes, index) if nbytes else None
    if module == "numpy":
        if not obj.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError(f"{what} is not C-contiguous")
        if writable and not obj.flags["WRITEABLE"]:
            raise InvalidArgumentError(f"{what} is read-only")
        return _Host(obj) if obj.nbytes else None
    raise InvalidArgumentError(
        f"{what}: expected a torch tensor, a numpy array or a devipc span or buffer, "
        f"got {type(obj).__name__}"
    )


def _framework_stream(rt: Runtime, objs: Iterable[Any]) -> Stream | None:
    """The framework's current stream of the first torch device tensor among `objs`
    (``torch.cuda`` under HIP, ``torch.npu`` on Ascend), wrapped; None when there is
    none (CPU tensors, arrays, devipc memory)."""
    for obj in objs:
        if not (type(obj).__module__.startswith("torch") and hasattr(obj, "device")):
            continue
        kind = obj.device.type
        if kind not in ("cuda", "npu"):
            return None
        import torch

        current = getattr(torch, kind).current_stream(obj.device)
        raw = getattr(current, "cuda_stream", None) or getattr(current, "npu_stream", None)
        return Stream.wrap(rt, int(raw), obj.device.index or 0) if raw else None
    return None


@dataclass(frozen=True)
class Entry:
    """One piece of a tensor in a bucket: the tensor's ``name``, ``dtype`` and ``shape``,
    where the piece lies in the bucket (``offset``, ``nbytes``), where it starts in the
    tensor (``start``, bytes) and the tensor's size (``total``, bytes). A tensor that fits
    in one bucket is one entry with ``start == 0`` and ``nbytes == total``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    start: int
    total: int

    @property
    def whole(self) -> bool:
        """Whether the entry is the whole tensor."""
        return self.start == 0 and self.nbytes == self.total

    def to_wire(self) -> list[Any]:
        return [self.name, self.dtype, list(self.shape), self.offset, self.nbytes, self.start, self.total]

    @staticmethod
    def from_wire(raw: Any, bucket_bytes: int) -> "Entry":
        """Parses an entry the producer sent; anything malformed or outside the bucket is
        ``InvalidArgumentError`` (the spans made from it are bounded by the import's real
        size as well)."""
        ok = isinstance(raw, list) and len(raw) == 7
        if ok:
            name, dtype, shape, offset, nbytes, start, total = raw
            ok = (
                isinstance(name, str)
                and isinstance(dtype, str)
                and len(dtype) <= 32
                and isinstance(shape, list)
                and all(_is_int(d) for d in shape)
                and all(_is_int(x) for x in (offset, nbytes, start, total))
                and offset + nbytes <= bucket_bytes
                and start + nbytes <= total
            )
        if not ok:
            raise InvalidArgumentError(f"the producer described a bucket entry badly: {raw!r:.200}")
        return Entry(name, dtype, tuple(shape), offset, nbytes, start, total)


def _pack(
    items: list[tuple[str, Any, Span | _Host | None]], bucket_bytes: int
) -> list[list[tuple[Entry, Span | _Host | None]]]:
    """Splits the tensors into fills: each a list of (entry, source piece)."""
    fills: list[list[tuple[Entry, Span | _Host | None]]] = [[]]
    used = 0
    for name, obj, src in items:
        total = len(src) if src is not None else 0
        dtype, shape = _dtype_name(obj), tuple(_shape(obj))
        start = 0
        while True:
            used = min(-(-used // ALIGN) * ALIGN, bucket_bytes)
            left = total - start
            # A tensor that fits in a bucket is never split (it can be viewed whole); a
            # larger one fills what is left of the bucket and goes on in the next ones.
            if left and used and (used >= bucket_bytes or bucket_bytes - used < left <= bucket_bytes):
                fills.append([])
                used = 0
            n = min(left, bucket_bytes - used)
            piece = src[start : start + n] if src is not None and n else None
            fills[-1].append((Entry(name, dtype, shape, used, n, start, total), piece))
            used += n
            start += n
            if start >= total:
                break
    return fills if fills[0] else []


# --------------------------------------------------------------------------------------
# The producer.


class _Consumer:
    """The producer's record of one consumer."""

    def __init__(self, index: int, line: _Line):
        self.index = index
        self.line = line
        self.lost = False


class Producer:
    """The producing side of a refit channel: allocates the staging area and the signals,
    serves ``consumers`` consumers at ``path`` (``accept``), and sends a step of tensors
    with ``send``. ``allow_uids``: the users (besides this one) whose processes may
    connect."""

    def __init__(
        self,
        runtime: Runtime,
        path: str | os.PathLike[str],
        *,
        consumers: int,
        bucket_bytes: int,
        buckets: int = 2,
        device: int = 0,
        allow_uids: Iterable[int] = (),
    ):
        if not _is_int(consumers, 1):
            raise InvalidArgumentError(f"consumers must be >= 1, not {consumers!r}")
        if not _is_int(bucket_bytes, 1):
            raise InvalidArgumentError(f"bucket_bytes must be >= 1, not {bucket_bytes!r}")
        if not (_is_int(buckets, 1) and buckets <= MAX_BUCKETS):
            raise InvalidArgumentError(
                f"buckets must be 1 to {MAX_BUCKETS} (a signal's ring of events), not {buckets!r}"
            )
        self._rt = runtime
        self._device = device
        self._n = consumers
        self._bucket_bytes = bucket_bytes
        self._k = buckets
        self._uids = {os.getuid(), *allow_uids}
        self._path = os.fspath(path)
        self._share_path = self._path + ".share"
        self._consumers: list[_Consumer] = []
        self._fills = 0
        self._step = 0
        self._stream: Stream | None = None
        self._pending: list[tuple[Any, list[Any]]] = []
        self._listener: socket.socket | None = None
        self._server = None
        self._signals: list[Signal] = []
        self._staging = None
        try:
            self._staging = runtime.allocate(buckets * bucket_bytes, device)
            self._signals = [runtime.create_signal(device) for _ in range(2 * consumers)]
            self._listener = _listen(self._path, consumers)
            self._server = self._staging.share(
                self._share_path,
                signals=self._signals,
                options=ShareOptions(allow_uids=sorted(self._uids - {os.getuid()})),
            )
        except BaseException:
            self.close()
            raise

    @property
    def path(self) -> str:
        """The control socket's path (what consumers connect to)."""
        return self._path

    @property
    def bucket_bytes(self) -> int:
        """The size of one bucket."""
        return self._bucket_bytes

    @property
    def buckets(self) -> int:
        """How many buckets the staging area has."""
        return self._k

    @property
    def consumers(self) -> list[dict[str, Any]]:
        """The consumers accepted so far: ``{"index", "pid", "uid", "lost"}`` each."""
        return [
            {"index": c.index, "pid": c.line.pid, "uid": c.line.uid, "lost": c.lost}
            for c in self._consumers
        ]

    @property
    def fills(self) -> int:
        """How many buckets were filled so far (the signals' last generation)."""
        return self._fills

    def accept(self, timeout: float | None = None) -> None:
        """Waits until every consumer connected (``TimedOutError`` after ``timeout``
        seconds; ``None``: no limit). A process of a user not allowed is turned away."""
        if self._listener is None:
            raise _binding_error("closed", "the refit producer was closed", None)
        deadline = _deadline(timeout)
        while len(self._consumers) < self._n:
            ready, _, _ = select.select([self._listener], [], [], _slice(deadline))
            if not ready:
                if _expired(deadline):
                    raise TimedOutError(
                        f"timed out: {len(self._consumers)} of {self._n} consumers connected to {self._path}"
                    )
                continue
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, ConnectionAbortedError):
                continue  # the client left between select and accept
            sock.setblocking(True)
            line = _Line(sock, f"consumer {len(self._consumers)}")
            if line.uid not in self._uids:
                sock.close()
                continue
            # One connection's set-up is bounded on its own: a client that left (a probe,
            # a consumer killed while connecting) or stalls is dropped, not waited for.
            setup = time.monotonic() + _SETUP
            try:
                self._serve(line, setup if deadline is None else min(deadline, setup))
            except (TimedOutError, PeerLostError):
                line.close()
                if _expired(deadline):
                    raise
            except BaseException:
                line.close()
                raise

    def _serve(self, line: _Line, deadline: float | None) -> None:
        index = len(self._consumers)
        line.send(
            {
                "v": PROTOCOL,
                "index": index,
                "consumers": self._n,
                "buckets": self._k,
                "bucket_bytes": self._bucket_bytes,
                "share": self._share_path,
            }
        )
        left = _left(deadline)
        peer = self._server.accept(timeout=left)
        if peer["pid"] != line.pid:
            raise InvalidArgumentError(
                f"process {peer['pid']} took the staging area meant for consumer {index} "
                f"(pid {line.pid}): another process raced to {self._share_path}"
            )
        line.recv(deadline, "the consumer's ready")
        self._consumers.append(_Consumer(index, line))

    def _live(self) -> list[_Consumer]:
        return [c for c in self._consumers if not c.lost]

    def _wait_ack(self, c: _Consumer, generation: int, stream: Stream, deadline: float | None) -> None:
        """Has `stream` wait for consumer `c`'s ack `generation`; marks `c` lost if it is gone."""
        acked = self._signals[self._n + c.index]
        while True:
            try:
                acked.wait_for(stream, generation, timeout=_slice(deadline))
                return
            except TimedOutError:
                if c.line.poll_gone():
                    c.lost = True
                    return
                if _expired(deadline):
                    raise TimedOutError(
                        f"timed out: consumer {c.index} (pid {c.line.pid}) did not acknowledge "
                        f"fill {generation}"
                    ) from None

    def send(
        self,
        tensors: Mapping[str, Any] | Iterable[tuple[str, Any]],
        *,
        stream: Stream | None = None,
        timeout: float | None = None,
    ) -> int:
        """Sends one step: every ``(name, tensor)`` to every live consumer, and returns the
        step's number (1, 2, ...). Returns once the copies are enqueued on ``stream``: by
        default torch's current stream of the tensors' device (so the copies follow the
        work that produced them), else a stream of the channel's (memory already written:
        CPU tensors on the emulator, arrays, devipc buffers). The tensors are kept alive
        until their copies ran.

        A consumer found gone is dropped and the step finished for the others, then
        ``PeerLostError`` names the lost consumers (``details["consumers"]``); the next
        ``send`` serves the rest. ``timeout`` bounds the whole step (``None``: no limit;
        a dead consumer is found either way)."""
        if self._staging is None:
            raise _binding_error("closed", "the refit producer was closed", None)
        if len(self._consumers) < self._n:
            raise InvalidArgumentError(
                f"{len(self._consumers)} of {self._n} consumers connected: call accept() first"
            )
        deadline = _deadline(timeout)
        pairs_in = tensors.items() if isinstance(tensors, Mapping) else tensors
        items = []
        for name, obj in pairs_in:
            if not isinstance(name, str):
                raise InvalidArgumentError(f"tensor names are strings, not {type(name).__name__}")
            items.append((name, obj, _span_of(self._rt, obj, self._device, f"tensor {name!r}")))
        fills = _pack(items, self._bucket_bytes) or [[]]
        if stream is None:
            stream = _framework_stream(self._rt, (obj for _, obj, _ in items))
        if stream is None:
            if self._stream is None:
                self._stream = self._rt.create_stream(self._device)
            stream = self._stream
        self._pending = [(r, keep) for r, keep in self._pending if not r.is_complete()]
        lost_before = {c.index for c in self._consumers if c.lost}
        if not self._live():
            raise _peer_lost("every consumer of this refit channel is gone", consumers=sorted(lost_before))
        self._step += 1
        for i, fill in enumerate(fills):
            f = self._fills + 1
            bucket = (f - 1) % self._k
            base = bucket * self._bucket_bytes
            if f > self._k:
                for c in self._live():
                    self._wait_ack(c, f - self._k, stream, deadline)
            pairs = []
            for e, src in fill:
                dst = self._staging.span(base + e.offset, base + e.offset + e.nbytes)
                if isinstance(src, _Host):
                    stream.write(dst, src.bytes())
                elif src is not None:
                    pairs.append((dst, src))
            if pairs:
                self._pending.append((stream.copy_batch(pairs), [obj for _, obj, _ in items]))
            message = {
                "step": self._step,
                "fill": f,
                "bucket": bucket,
                "end": i == len(fills) - 1,
                "entries": [e.to_wire() for e, _ in fill],
            }
            for c in self._live():
                posted = self._signals[c.index].post(stream, timeout=_left(deadline))
                if posted != f:
                    raise InvalidArgumentError(
                        f"consumer {c.index}'s signal is at generation {posted}, the channel at "
                        f"fill {f}: the signal was posted outside this channel"
                    )
            for c in self._live():
                try:
                    c.line.send(message)
                except DevipcError:
                    c.lost = True
            self._fills = f
        lost = sorted({c.index for c in self._consumers if c.lost} - lost_before)
        if lost:
            pids = [self._consumers[i].line.pid for i in lost]
            raise _peer_lost(
                f"refit step {self._step}: consumer(s) {lost} (pid {pids}) are gone; the step "
                f"went to the others, and the next steps will",
                consumers=lost,
                pids=pids,
                step=self._step,
            )
        return self._step

    def synchronize(self) -> None:
        """Waits until every copy ``send`` enqueued ran (the sources may then be freed)."""
        for r, _ in self._pending:
            r.wait()
        self._pending.clear()

    def close(self) -> None:
        """Tells the consumers the channel is closed, stops serving and releases the
        staging area (devipc keeps it mapped while a consumer still has it) and the
        signals. Safe to call twice."""
        for c in self._consumers:
            if not c.lost:
                try:
                    c.line.send({"bye": True})
                except DevipcError:
                    pass
            c.line.close()
        self._consumers = []
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            try:
                os.unlink(self._path)
            except OSError:
                pass
        self._pending.clear()
        for s in self._signals:
            s.close()
        self._signals = []
        if self._staging is not None:
            self._staging.close()
            self._staging = None

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *args: object) -> bool:
        self.close()
        return False


def _listen(path: str, backlog: int) -> socket.socket:
    """A listening Unix socket at `path` (mode 0600); a socket left there by a process
    that is gone is replaced, anything else is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise InvalidArgumentError(f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)
        except OSError as e:
            raise InvalidArgumentError(f"{path}: {e}") from None
        else:
            raise InvalidArgumentError(f"{path}: another process listens there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        sock.listen(max(backlog, 1))
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise InvalidArgumentError(f"cannot listen at {path}: {e}") from None
    return sock


# --------------------------------------------------------------------------------------
# The consumer.


class Bucket:
    """One filled bucket, as a consumer sees it: ``entries`` and the staging memory
    (``span``, ``view``), valid until ``ack()`` (the iterator acks it when it moves on).
    The producer's copies are ordered before the work the consumer enqueues on its
    stream; host access to a view (emulator) needs that stream synchronized first."""

    def __init__(self, consumer: "Consumer", step: int, fill: int, bucket: int, entries: list[Entry], stream: Stream):
        self._consumer = consumer
        self.step = step
        self.fill = fill
        self.index = bucket
        self.entries = entries
        self.stream = stream
        self.acked = False

    def span(self, entry: Entry) -> Span:
        """The staging memory of `entry`'s piece."""
        base = self.index * self._consumer._bucket_bytes + entry.offset
        return self._consumer._staging.span(base, base + entry.nbytes)

    def view(self, entry: Entry) -> Any:
        """A DLPack view (``torch.from_dlpack``) of a whole tensor's entry."""
        if not entry.whole:
            raise InvalidArgumentError(f"{entry.name!r} is split across buckets: copy it out with receive()")
        strides = []
        acc = 1
        for d in reversed(entry.shape):
            strides.append(acc)
            acc *= d
        return self._consumer._staging.view(
            entry.dtype,
            list(entry.shape),
            list(reversed(strides)),
            self.index * self._consumer._bucket_bytes + entry.offset,
        )

    def ack(self) -> None:
        """Tells the producer, in stream order, that the bucket may be refilled: the
        consumer's work enqueued on ``stream`` so far comes first."""
        if not self.acked:
            self._consumer._acked.post(self.stream)
            self.acked = True


class Consumer:
    """The consuming side of a refit channel: connects to the producer at ``path`` and
    receives steps (``receive`` into the caller's tensors, or ``buckets`` for views)."""

    def __init__(
        self,
        runtime: Runtime,
        path: str | os.PathLike[str],
        *,
        device: int = 0,
        timeout: float | None = 30.0,
        allow_uids: Iterable[int] = (),
    ):
        self._rt = runtime
        self._device = device
        self._line: _Line | None = None
        self._staging = None
        self._filled: Signal | None = None
        self._acked: Signal | None = None
        self._stream: Stream | None = None
        self._fills = 0
        self._abandoned: int | None = None
        path = os.fspath(path)
        deadline = _deadline(timeout)
        try:
            self._line = _connect(path, deadline, {os.getuid(), *allow_uids})
            hello = self._line.recv(deadline, "the channel's description")
            ok = hello.get("v") == PROTOCOL and all(
                _is_int(hello.get(k), 1) for k in ("consumers", "buckets", "bucket_bytes")
            )
            ok = ok and _is_int(hello.get("index")) and hello["index"] < hello["consumers"]
            ok = ok and hello["buckets"] <= MAX_BUCKETS and isinstance(hello.get("share"), str)
            if not ok:
                raise InvalidArgumentError(f"{path} is not a devipc refit producer (it said {hello!r:.200})")
            self.index: int = hello["index"]
            self._n = hello["consumers"]
            self._k = hello["buckets"]
            self._bucket_bytes = hello["bucket_bytes"]
            got = runtime.connect(
                hello["share"], device, timeout=_left(deadline) if deadline is not None else 30.0
            )
            self._staging = got.buffer
            signals = list(got.signals)
            if len(signals) != 2 * self._n or len(got.buffer) < self._k * self._bucket_bytes:
                for s in signals:
                    s.close()
                raise InvalidArgumentError(
                    f"the producer shared {len(signals)} signals and {len(got.buffer)} bytes; "
                    f"{self._n} consumers of {self._k} x {self._bucket_bytes} bytes need "
                    f"{2 * self._n} and {self._k * self._bucket_bytes}"
                )
            self._filled = signals[self.index]
            self._acked = signals[self._n + self.index]
            for i, s in enumerate(signals):
                if i not in (self.index, self._n + self.index):
                    s.close()
            self._line.send({"ready": True})
        except BaseException:
            self.close()
            raise

    @property
    def bucket_bytes(self) -> int:
        """The size of one bucket."""
        return self._bucket_bytes

    @property
    def buckets_count(self) -> int:
        """How many buckets the staging area has."""
        return self._k

    def _own_stream(self) -> Stream:
        if self._stream is None:
            self._stream = self._rt.create_stream(self._device)
        return self._stream

    def buckets(self, *, stream: Stream | None = None, timeout: float | None = None) -> Iterator[Bucket]:
        """The buckets of the next step, in order; each is acked when the iteration moves
        past it (or ends early). ``stream`` (default: the channel's) waits for each
        bucket's fill before the work the caller enqueues for it. A producer that is gone
        is ``PeerLostError``; ``timeout`` bounds the whole step."""
        if self._line is None:
            raise _binding_error("closed", "the refit consumer was closed", None)
        stream = stream or self._own_stream()
        deadline = _deadline(timeout)
        while True:
            msg = self._line.recv(deadline, "the next bucket")
            step, fill, index, end = msg.get("step"), msg.get("fill"), msg.get("bucket"), msg.get("end")
            raw = msg.get("entries")
            if not (
                _is_int(step, 1)
                and fill == self._fills + 1
                and index == (fill - 1) % self._k
                and isinstance(end, bool)
                and isinstance(raw, list)
            ):
                raise InvalidArgumentError(
                    f"the producer sent fill {fill!r} (bucket {index!r}) after fill {self._fills}"
                )
            entries = [Entry.from_wire(e, self._bucket_bytes) for e in raw]
            self._filled.wait_for(stream, fill, timeout=_left(deadline))
            self._fills = fill
            bucket = Bucket(self, step, fill, index, entries, stream)
            if step == self._abandoned:
                # The rest of a step whose iteration ended early: acked, not shown.
                bucket.ack()
                if end:
                    self._abandoned = None
                continue
            finished = False
            try:
                yield bucket
                finished = True
            finally:
                bucket.ack()
                if not finished and not end:
                    self._abandoned = step
            if end:
                return

    def receive(
        self,
        into: Mapping[str, Any],
        *,
        stream: Stream | None = None,
        timeout: float | None = None,
    ) -> list[str]:
        """Receives one step into ``into`` (name -> destination tensor, array or span of
        the tensor's size) with stream-ordered copies, and returns the names received.
        ``stream`` defaults to torch's current stream of the destinations' device: the
        copies are ordered before the work enqueued on it next (keep the destinations
        alive until it ran them). Without a device tensor there, the channel's own stream
        is used and the copies are waited for before it returns. Every bucket is
        acked even when a name has no destination or a size differs: those are raised
        afterwards, as one ``InvalidArgumentError``."""
        if stream is None:
            stream = _framework_stream(self._rt, into.values())
        own = stream is None
        stream = stream or self._own_stream()
        spans: dict[str, Span | _Host | None] = {}
        problems: list[str] = []
        names: list[str] = []
        requests = []
        reads: list[tuple[Any, _Host]] = []
        for bucket in self.buckets(stream=stream, timeout=timeout):
            pairs = []
            for e in bucket.entries:
                if e.start == 0:
                    names.append(e.name)
                if e.name not in spans:
                    if e.name not in into:
                        spans[e.name] = None
                        problems.append(f"{e.name!r} has no destination")
                        continue
                    dst = into[e.name]
                    try:
                        span = _span_of(self._rt, dst, self._device, f"destination {e.name!r}", writable=True)
                    except DevipcError as err:
                        spans[e.name] = None
                        problems.append(str(err))
                        continue
                    size = len(span) if span is not None else 0
                    if size != e.total:
                        spans[e.name] = None
                        problems.append(f"{e.name!r} is {e.total} bytes, its destination {size}")
                        continue
                    if _dtype_name(dst) not in (e.dtype, "uint8") and not isinstance(dst, (Span, Buffer)):
                        problems.append(f"{e.name!r} is {e.dtype}, its destination {_dtype_name(dst)}")
                    spans[e.name] = span
                span = spans[e.name]
                if isinstance(span, _Host) and e.nbytes:
                    reads.append((stream.read(bucket.span(e)), span[e.start : e.start + e.nbytes]))
                elif span is not None and e.nbytes:
                    pairs.append((span[e.start : e.start + e.nbytes], bucket.span(e)))
            if pairs:
                requests.append(stream.copy_batch(pairs))
        for r, host in reads:
            host.bytes()[:] = r.result()
        if own:
            for r in requests:
                r.wait()
        if problems:
            raise InvalidArgumentError("refit receive: " + "; ".join(problems[:20]))
        return names

    def close(self) -> None:
        """Says goodbye to the producer and releases the staging import and the signals.
        Safe to call twice."""
        if self._line is not None:
            try:
                self._line.send({"bye": True})
            except DevipcError:
                pass
            self._line.close()
            self._line = None
        for s in (self._filled, self._acked):
            if s is not None:
                s.close()
        self._filled = self._acked = None
        if self._staging is not None:
            self._staging.close()
            self._staging = None

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *args: object) -> bool:
        self.close()
        return False


def _connect(path: str, deadline: float | None, uids: set[int]) -> _Line:
    """Connects to the producer's control socket, waiting for it to appear."""
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            sock.close()
            if _expired(deadline):
                raise TimedOutError(f"timed out waiting for a refit producer at {path}: {e}") from None
            time.sleep(_slice(deadline))
            continue
        except OSError as e:
            sock.close()
            raise InvalidArgumentError(f"cannot connect to {path}: {e}") from None
        line = _Line(sock, "the producer")
        if line.uid not in uids:
            line.close()
            raise InvalidArgumentError(
                f"the process at {path} runs as uid {line.uid}, which this consumer does not trust"
            )
        return line
