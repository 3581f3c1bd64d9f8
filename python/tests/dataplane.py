"""Shared aids of the data-plane tests: byte patterns, and a ``Gate`` that keeps an
emulated stream busy so that work enqueued meanwhile is really in flight.

A ``Gate`` holds the stream with the emulator's hook (``devipc.testing.hold_stream``, as
if a long kernel occupied it): everything the test enqueues while the gate is up stays
queued, and runs in order once the gate closes.
"""

from __future__ import annotations

import time

import devipc
import devipc.testing


def pattern(n: int, seed: int) -> bytes:
    """``n`` bytes that differ from any other seed's at almost every offset."""
    return bytes((i * 31 + seed) & 0xFF for i in range(256)) * (n // 256) + bytes(
        (i * 31 + seed) & 0xFF for i in range(n % 256)
    )


class Gate:
    """Holds ``stream`` from its construction until ``close()``, which releases it and
    returns once the work queued meanwhile ran."""

    def __init__(self, rt: devipc.Runtime, stream: devipc.Stream, mib: int = 0):
        del rt, mib  # the hook needs neither (kept for the callers' signature)
        self._stream: devipc.Stream | None = stream
        devipc.testing.hold_stream(stream)

    def close(self) -> None:
        if self._stream is not None:
            devipc.testing.release_stream(self._stream)
            self._stream = None

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


def until_in_flight(attempt) -> None:
    """Runs ``attempt()``, which reports (returns ``True``) that the work it examined was
    still in flight behind its gate; fails if it was not (the gate holds the stream, so it
    always is)."""
    assert attempt(), "the gate did not hold the work in flight"


def reclaim_dead(kind: str, ctx) -> None:
    """After a test killed a process: starts the emulator in a new process that exports
    once (the emulator reclaims what dead processes held; a process's first export sweeps
    dead exporters' records), then waits for the files to go."""
    import roles
    from conftest import leftovers

    swept = ctx.Queue()
    sweeper = ctx.Process(target=roles.exporting_sweeper, args=(kind, swept))
    sweeper.start()
    assert swept.get(timeout=60) == "swept"
    sweeper.join(30)
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
