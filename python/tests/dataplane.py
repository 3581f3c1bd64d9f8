"""Shared aids of the data-plane tests: byte patterns, and a ``Gate`` that keeps an
emulated stream busy so that work enqueued meanwhile is really in flight.

The emulator runs an operation enqueued on an idle stream at once, on the calling thread
(as a device starts work on an idle stream at once); only work enqueued while the stream
is busy is queued, and runs in order on the stream's worker. A ``Gate`` makes the stream
busy: a helper thread enqueues one large copy, which runs on that thread for a few
hundred milliseconds (one copy: the copies of a batch are separate operations, between
which the test's own work would slip in), and everything the test enqueues meanwhile
waits behind it.
"""

from __future__ import annotations

import threading
import time

import devipc


def pattern(n: int, seed: int) -> bytes:
    """``n`` bytes that differ from any other seed's at almost every offset."""
    return bytes((i * 31 + seed) & 0xFF for i in range(256)) * (n // 256) + bytes(
        (i * 31 + seed) & 0xFF for i in range(n % 256)
    )


class Gate:
    """Keeps ``stream`` busy with one copy of ``mib`` MiB (tens to hundreds of ms at
    memory bandwidth) from its construction until the copy ends; ``close()`` waits for it
    and frees its memory."""

    def __init__(self, rt: devipc.Runtime, stream: devipc.Stream, mib: int = 384):
        self._a = rt.allocate(mib << 20, stream.device)
        self._b = rt.allocate(mib << 20, stream.device)
        self._request: devipc.Request | None = None
        probe = rt.create_event(stream.device)
        for _ in range(20):
            self._thread = threading.Thread(target=self._run, args=(stream,), name="gate")
            self._thread.start()
            # The stream is busy once an event recorded on it no longer completes at once
            # (on an idle stream the record runs inline).
            while self._thread.is_alive():
                probe.record(stream)
                if not probe.is_complete():
                    return
                time.sleep(0.0005)
            self._thread.join()
        raise AssertionError("the gate never held the stream")

    def _run(self, stream: devipc.Stream) -> None:
        self._request = stream.copy(self._b, self._a)

    def close(self) -> None:
        self._thread.join(60)
        assert self._request is not None
        self._request.wait(timeout=60)
        self._request = None
        self._a.close()
        self._b.close()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


def until_in_flight(attempt, tries: int = 6) -> None:
    """Runs ``attempt()`` until it reports (returns ``True``) that the work it examined
    was still in flight behind its gate, at most ``tries`` times: on a loaded machine a
    gate can end before the test's next step, and such a run proves nothing (its byte
    checks still hold). Fails if no run caught the work in flight."""
    for _ in range(tries):
        if attempt():
            return
    raise AssertionError(f"in {tries} runs the gate never held the work in flight")
