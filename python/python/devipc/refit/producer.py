"""The producing side of a refit channel."""

from __future__ import annotations

import os
import select
import socket
import time
from typing import Any, Iterable, Mapping

from .._devipc import Runtime, ShareOptions, Signal, Stream, _binding_error
from ..errors import DevipcError, InvalidArgumentError, PeerLostError, TimedOutError
from ._line import (
    MAX_BUCKETS,
    PROTOCOL,
    _SETUP,
    _Guard,
    _Line,
    _deadline,
    _expired,
    _is_int,
    _left,
    _listen,
    _peer_lost,
    _slice,
)
from ._memory import _framework_stream, _Host, _pack, _span_of


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
        if not _is_int(device):
            raise InvalidArgumentError(f"device must be an index >= 0, not {device!r}")
        self._guard = _Guard("this refit producer")
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
        seconds; ``None``: no limit). A process of a user not allowed is turned away; a
        client that leaves, stalls (10 s) or says something wrong during its set-up is
        dropped and the next one served."""
        deadline = _deadline(timeout)
        with self._guard:
            if self._listener is None:
                raise _binding_error("closed", "the refit producer was closed", None)
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
                # One connection's set-up is bounded on its own: a client that left (a
                # probe, a consumer killed while connecting), stalls or misbehaves is
                # dropped, not waited for.
                setup = time.monotonic() + _SETUP
                try:
                    self._serve(line, setup if deadline is None else min(deadline, setup))
                except (DevipcError, RecursionError, ValueError):
                    line.close()
                    if _expired(deadline):
                        raise TimedOutError(
                            f"timed out: {len(self._consumers)} of {self._n} consumers connected to {self._path}"
                        ) from None
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
            },
            deadline,
        )
        # The staging area goes to the process on this control line. Another process of
        # an allowed user that connects to the share socket out of turn is served too
        # (the rendezvous cannot take a grant back) but not counted: processes of the
        # allowed users are trusted, as with every devipc export.
        while True:
            peer = self._server.accept(timeout=_left(deadline))
            if peer["pid"] == line.pid:
                break
            if line.poll_gone():
                raise _peer_lost(f"consumer {index} left during its set-up", pid=line.pid)
        line.recv(deadline, "the consumer's ready")
        self._consumers.append(_Consumer(index, line))

    def _live(self) -> list[_Consumer]:
        return [c for c in self._consumers if not c.lost]

    def _drop(self, c: _Consumer) -> None:
        """Marks `c` lost and closes its line (a consumer that is in fact alive learns it)."""
        c.lost = True
        c.line.goodbye()

    def _wait_ack(self, c: _Consumer, generation: int, stream: Stream, deadline: float | None) -> None:
        """Has `stream` wait for consumer `c`'s ack `generation`; drops `c` if it is gone."""
        acked = self._signals[self._n + c.index]
        while True:
            try:
                acked.wait_for(stream, generation, timeout=_slice(deadline))
                return
            except TimedOutError:
                if c.line.poll_gone():
                    self._drop(c)
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
        until their copies ran. Names are unique strings.

        A consumer found gone is dropped and the step finished for the others, then
        ``PeerLostError`` names the lost consumers (``details["consumers"]``); the next
        ``send`` serves the rest. ``timeout`` bounds the whole step (``None``: no limit;
        a dead consumer is found either way). A step that fails after it began (a
        timeout, say) is abandoned: the consumers are told, and their ``receive`` raises
        instead of returning a half-updated step."""
        deadline = _deadline(timeout)
        with self._guard:
            if self._staging is None:
                raise _binding_error("closed", "the refit producer was closed", None)
            if len(self._consumers) < self._n:
                raise InvalidArgumentError(
                    f"{len(self._consumers)} of {self._n} consumers connected: call accept() first"
                )
            items = self._items(tensors)
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
            try:
                self._fill_all(fills, items, stream, deadline)
            except BaseException as e:
                for c in self._live():
                    try:
                        c.line.send({"step": self._step, "abandon": f"{type(e).__name__}: {e}"[:500]}, time.monotonic() + 1)
                    except DevipcError:
                        self._drop(c)
                raise
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

    def _items(self, tensors: Any) -> list[tuple[str, Any, Any]]:
        """Every ``(name, tensor, memory)``, checked before anything is sent."""
        try:
            pairs = list(tensors.items() if isinstance(tensors, Mapping) else tensors)
        except TypeError as e:
            raise InvalidArgumentError(f"send takes a mapping or (name, tensor) pairs: {e}") from None
        items, seen = [], set()
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise InvalidArgumentError(f"send takes (name, tensor) pairs, not {pair!r:.80}")
            name, obj = pair
            if not isinstance(name, str):
                raise InvalidArgumentError(f"tensor names are strings, not {type(name).__name__}")
            if name in seen:
                raise InvalidArgumentError(f"tensor {name!r} is named twice in one step")
            seen.add(name)
            items.append((name, obj, _span_of(self._rt, obj, self._device, f"tensor {name!r}")))
        return items

    def _fill_all(self, fills: list, items: list, stream: Stream, deadline: float | None) -> None:
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
            self._fills = f
            for c in self._live():
                try:
                    c.line.send(message, deadline)
                except PeerLostError:
                    self._drop(c)

    def synchronize(self) -> None:
        """Waits until every copy ``send`` enqueued ran (the sources may then be freed)."""
        with self._guard:
            for r, _ in self._pending:
                r.wait()
            self._pending.clear()

    def close(self) -> None:
        """Tells the consumers the channel is closed (without waiting for them), stops
        serving and releases the staging area (devipc keeps it mapped while a consumer
        still has it) and the signals. Safe to call twice. In a forked child it only
        closes the child's copies of the sockets."""
        if self._guard.forked():
            for c in self._consumers:
                c.line.close()
            if self._listener is not None:
                self._listener.close()
            self._consumers, self._listener = [], None
            return
        for c in self._consumers:
            c.line.goodbye() if not c.lost else c.line.close()
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
