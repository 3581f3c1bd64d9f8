"""The consuming side of a refit channel."""

from __future__ import annotations

import os
from typing import Any, Iterable, Iterator, Mapping

from .._devipc import Buffer, Runtime, Signal, Span, Stream, _binding_error
from ..errors import DevipcError, InvalidArgumentError, PeerLostError, TimedOutError
from ._line import (
    MAX_BUCKETS,
    PROTOCOL,
    _Guard,
    _Line,
    _connect,
    _deadline,
    _expired,
    _is_int,
    _left,
    _peer_lost,
    _slice,
)
from ._memory import Entry, _dtype_name, _framework_stream, _Host, _span_of


class _StepCopy:
    """The copies of one step into the caller's destinations, and what was wrong with
    them (raised after the step, once every bucket was acked)."""

    def __init__(self, rt: Runtime, device: int, into: Mapping[str, Any]):
        self.rt, self.device, self.into = rt, device, into
        self.spans: dict[str, Span | _Host | None] = {}
        self.totals: dict[str, int] = {}
        self.problems: list[str] = []
        self.names: list[str] = []
        self.requests: list[Any] = []
        self.reads: list[tuple[Any, _Host]] = []

    def _destination(self, e: Entry) -> Span | _Host | None:
        """The destination of `e`'s tensor, checked once per name (None: none usable)."""
        if e.name in self.spans:
            return self.spans[e.name]
        self.spans[e.name] = None
        if e.name not in self.into:
            self.problems.append(f"{e.name!r} has no destination")
            return None
        dst = self.into[e.name]
        try:
            span = _span_of(self.rt, dst, self.device, f"destination {e.name!r}", writable=True)
        except DevipcError as err:
            self.problems.append(str(err))
            return None
        size = len(span) if span is not None else 0
        if size != e.total:
            self.problems.append(f"{e.name!r} is {e.total} bytes, its destination {size}")
            return None
        if _dtype_name(dst) not in (e.dtype, "uint8") and not isinstance(dst, (Span, Buffer)):
            self.problems.append(f"{e.name!r} is {e.dtype}, its destination {_dtype_name(dst)}")
        self.spans[e.name] = span
        return span

    def enqueue(self, bucket: "Bucket", stream: Stream) -> None:
        """Enqueues the copies of `bucket`'s entries into their destinations."""
        pairs = []
        for e in bucket.entries:
            if e.start == 0:
                if e.name in self.totals:
                    self.problems.append(f"{e.name!r} came twice in one step")
                    continue
                self.names.append(e.name)
            if self.totals.setdefault(e.name, e.total) != e.total:
                self.problems.append(f"{e.name!r}'s pieces disagree on its size")
                continue
            span = self._destination(e)
            if isinstance(span, _Host) and e.nbytes:
                self.reads.append((stream.read(bucket.span(e)), span[e.start : e.start + e.nbytes]))
            elif span is not None and e.nbytes:
                pairs.append((span[e.start : e.start + e.nbytes], bucket.span(e)))
        if pairs:
            self.requests.append(stream.copy_batch(pairs))

    def finish(self, wait: bool, line: _Line, deadline: float | None) -> None:
        """Puts the host reads in place, waits for the device copies if asked to, and
        raises what was wrong. The waits are sliced: copies held up by a producer that
        died with its own copies queued (the fill's event never completes) are
        ``PeerLostError``, not a wait without end."""
        for r, host in self.reads:
            _wait(r, line, deadline)
            host.bytes()[:] = r.result()
        if wait:
            for r in self.requests:
                _wait(r, line, deadline)
        if self.problems:
            raise InvalidArgumentError("refit receive: " + "; ".join(self.problems[:20]))


def _wait(request: Any, line: _Line, deadline: float | None) -> None:
    """Waits for `request` by `deadline`, watching the producer's line."""
    while True:
        try:
            request.wait(timeout=_slice(deadline))
            return
        except TimedOutError:
            if line.poll_gone():
                raise _peer_lost(
                    f"the producer (pid {line.pid}) is gone with the copies of this step queued",
                    pid=line.pid,
                ) from None
            if _expired(deadline):
                raise


class _Abandoned(Exception):
    """The producer abandoned a step (``shown``: the one this iteration shows)."""

    def __init__(self, text: str, shown: bool):
        super().__init__(text)
        self.shown = shown


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
        if not _is_int(device):
            raise InvalidArgumentError(f"device must be an index >= 0, not {device!r}")
        self._guard = _Guard("this refit consumer")
        self._broken: str | None = None
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
            try:
                got = runtime.connect(
                    hello["share"], device, timeout=_left(deadline) if deadline is not None else 30.0
                )
            except DevipcError as e:
                if self._line.poll_gone():
                    raise _peer_lost(f"the producer at {path} left during the set-up: {e}", pid=self._line.pid) from e
                raise
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
        is ``PeerLostError``; a step the producer abandoned (its ``send`` failed after it
        began) is ``InvalidArgumentError``; ``timeout`` bounds the whole step."""
        deadline = _deadline(timeout)
        with self._guard:
            yield from self._buckets(stream, deadline)

    def _buckets(self, stream: Stream | None, deadline: float | None) -> Iterator[Bucket]:
        if self._line is None:
            raise _binding_error("closed", "the refit consumer was closed", None)
        if self._broken is not None:
            raise InvalidArgumentError(
                f"this refit consumer lost its place in the producer's steps ({self._broken}): make a new one"
            )
        stream = stream or self._own_stream()
        current = None  # the step this iteration shows
        while True:
            msg = self._line.recv(deadline, "the next bucket")
            try:
                bucket, end = self._next(msg, current, stream, deadline)
            except PeerLostError:
                raise
            except _Abandoned as a:
                if a.shown:
                    raise InvalidArgumentError(str(a)) from None
                continue
            except BaseException as e:
                self._broken = f"{type(e).__name__}: {e}"[:300]
                raise
            if bucket.step == self._abandoned:
                # The rest of a step whose iteration ended early: acked, not shown.
                bucket.ack()
                if end:
                    self._abandoned = None
                continue
            current = bucket.step
            finished = False
            try:
                yield bucket
                finished = True
            finally:
                bucket.ack()
                if not finished and not end:
                    self._abandoned = bucket.step
            if end:
                return

    def _next(self, msg: dict[str, Any], current: int | None, stream: Stream, deadline: float | None) -> tuple[Bucket, bool]:
        """The bucket `msg` describes, once `stream` waits for its fill."""
        step = msg.get("step")
        if "abandon" in msg:
            if not _is_int(step, 1):
                raise InvalidArgumentError(f"the producer abandoned step {step!r}")
            shown = step == current
            if step == self._abandoned:
                self._abandoned = None
            raise _Abandoned(f"the producer abandoned step {step}: {str(msg['abandon'])[:300]}", shown)
        fill, index, end, raw = msg.get("fill"), msg.get("bucket"), msg.get("end"), msg.get("entries")
        if not (
            _is_int(step, 1)
            and _is_int(fill, 1)
            and fill == self._fills + 1
            and index == (fill - 1) % self._k
            and isinstance(end, bool)
            and isinstance(raw, list)
        ):
            raise InvalidArgumentError(f"the producer sent fill {fill!r} (bucket {index!r}) after fill {self._fills}")
        if current is not None and step != current:
            raise InvalidArgumentError(f"the producer started step {step} before it ended step {current}")
        entries = [Entry.from_wire(e, self._bucket_bytes) for e in raw]
        self._wait_filled(stream, fill, deadline)
        self._fills = fill
        return Bucket(self, step, fill, index, entries, stream), end

    def _wait_filled(self, stream: Stream, fill: int, deadline: float | None) -> None:
        """Has `stream` wait for `fill`, in slices: a producer that died with its copies
        queued is ``PeerLostError``, not a wait without end."""
        while True:
            try:
                self._filled.wait_for(stream, fill, timeout=_slice(deadline))
                return
            except TimedOutError:
                if self._line.poll_gone():
                    raise _peer_lost(f"the producer (pid {self._line.pid}) is gone", pid=self._line.pid) from None
                if _expired(deadline):
                    raise
            except PeerLostError:
                raise
            except DevipcError as e:
                if self._line.poll_gone():
                    raise _peer_lost(f"the producer (pid {self._line.pid}) is gone: {e}", pid=self._line.pid) from e
                raise

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
        deadline = _deadline(timeout)
        if stream is None:
            stream = _framework_stream(self._rt, into.values())
        own = stream is None
        stream = stream or self._own_stream()
        step = _StepCopy(self._rt, self._device, into)
        with self._guard:
            for bucket in self._buckets(stream, deadline):
                step.enqueue(bucket, stream)
        step.finish(own, self._line, deadline)
        return step.names

    def close(self) -> None:
        """Says goodbye to the producer (without waiting) and releases the staging import
        and the signals. Safe to call twice. In a forked child it only closes the child's
        copy of the socket."""
        if self._guard.forked():
            if self._line is not None:
                self._line.close()
                self._line = None
            return
        if self._line is not None:
            self._line.goodbye()
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
