"""Threads: calls that wait on the runtime release the GIL, and ``close()`` on one thread
against an operation on another (a copy, ``ShareServer.accept``, ``Signal.wait``).

To make a call wait on purpose, a helper process holds the emulator's own ``flock``s (the
ledger's and the objects'), which the emulated vendor calls take: the call then waits in
the runtime until the helper lets go, as a real vendor call waits on the driver.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

import devipc
from devipc.testing import framework_free, framework_malloc

RELEASE = 0.3  # how long into the call the ticking thread lets the helper go (s)
HOLD_MAX = 3.0  # how long the helper holds the locks unless let go (s)
BLOCKED = 0.25  # a call that took this long waited on the locks (s)
STALL = 1.0  # the longest the ticking thread may go without running during the call (s)

_HOLDER = """
import fcntl, os, select, sys
files = []
for name in sys.argv[3:]:
    f = open(os.path.join(sys.argv[1], name), "rb")
    fcntl.flock(f, fcntl.LOCK_EX)
    files.append(f)
print("locked", flush=True)
select.select([sys.stdin], [], [], float(sys.argv[2]))
"""


def _hold_emulator_locks() -> subprocess.Popen:
    """A helper process holding every lock file of the emulator's state directory until
    a line on its stdin, or ``HOLD_MAX`` seconds (returns once it holds them)."""
    emu = os.environ["DEVIPC_EMU_DIR"]
    names = sorted(n for n in os.listdir(emu) if n == "ledger" or n.endswith(".lock"))
    helper = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, emu, str(HOLD_MAX), *names],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert helper.stdout.readline().strip() == "locked"
    return helper


def _run_while_locked(call) -> tuple[float, float]:
    """Runs ``call`` while the emulator's locks are held by a helper process, and a thread
    ticks every 5 ms meanwhile, letting the helper go ``RELEASE`` seconds into the call.
    Returns how long the call took and the longest the ticking thread went without
    running during it: when the call holds the GIL, the thread cannot run, so the helper
    keeps the locks ``HOLD_MAX`` seconds and the call waits all that time."""
    ticks: list[float] = []
    stop, calling = threading.Event(), threading.Event()
    helper = _hold_emulator_locks()

    def ticker():
        released = False
        while not stop.is_set():
            now = time.monotonic()
            ticks.append(now)
            if not released and calling.is_set() and now - started >= RELEASE:
                try:
                    helper.stdin.write("go\n")
                    helper.stdin.flush()
                except OSError:
                    pass  # it let go on its own (HOLD_MAX): the call held the GIL
                released = True
            time.sleep(0.005)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        while not ticks:
            time.sleep(0.001)
        started = time.monotonic()
        calling.set()
        call()
        ended = time.monotonic()
    finally:
        stop.set()
        thread.join()
        try:
            helper.stdin.close()
        except OSError:
            pass  # it let go on its own (see above)
        helper.wait(30)
    seen = [started] + [t for t in ticks if started < t < ended] + [ended]
    return ended - started, max(b - a for a, b in zip(seen, seen[1:]))


# Which calls wait on which emulator lock differs per backend (HIP: handles are made under
# the object's lock; Ascend: keys and trustlists are); each backend lists those it blocks.
def _calls(kind: str, rt: devipc.Runtime, tmp_path) -> tuple[dict, int, object]:
    buf, sig, victim = rt.allocate(4096), rt.create_signal(), rt.allocate(4096)
    ptr = framework_malloc(rt, 8192)
    token, stoken = buf.export(any_process=True), sig.export(any_process=True)
    me = [rt.process_id]
    calls = {
        "Runtime.create_signal": lambda: rt.create_signal().close(),
        "Runtime.export_external": lambda: rt.export_external(ptr, 4096, any_process=True),
        "Buffer.close": victim.close,
    }
    if kind == "hip":
        calls |= {
            "SharedBuffer.export": lambda: buf.export(any_process=True),
            "SharedBuffer.share": lambda: buf.share(tmp_path / "s.sock", any_process=True).close(),
            "Signal.export": lambda: sig.export(any_process=True),
        }
    else:
        calls |= {
            "SharedBuffer.grant": lambda: buf.grant(token, me),
            "Runtime.grant": lambda: rt.grant(token, me),
            "Signal.grant": lambda: sig.grant(stoken, me),
            "Runtime.close_external": lambda: rt.close_external(ptr),
        }

    def cleanup():
        try:
            rt.close_external(ptr)
        except devipc.errors.InvalidArgumentError:
            pass  # closed by the test
        framework_free(rt, ptr)
        buf.close()
        victim.close()
        sig.close()

    return calls, ptr, cleanup


NAMES = {
    "hip": ["Runtime.create_signal", "Runtime.export_external", "Buffer.close",
            "SharedBuffer.export", "SharedBuffer.share", "Signal.export"],
    "ascend": ["Runtime.create_signal", "Runtime.export_external", "Buffer.close",
               "SharedBuffer.grant", "Runtime.grant", "Signal.grant", "Runtime.close_external"],
}


@pytest.mark.parametrize("case", [(k, n) for k, names in NAMES.items() for n in names],
                         ids=lambda c: f"{c[0]}-{c[1]}")
def test_a_call_waiting_on_the_runtime_releases_the_gil(case, tmp_path):
    kind, name = case
    rt = devipc.Runtime.emulated(kind)
    calls, ptr, cleanup = _calls(kind, rt, tmp_path)
    if name == "Runtime.close_external":
        rt.export_external(ptr, 4096, any_process=True)
    try:
        took, stall = _run_while_locked(calls[name])
        # The call did wait on the runtime (else this test would prove nothing) ...
        assert took >= BLOCKED, f"{name} did not wait on the emulator's locks ({took:.3f}s)"
        # ... and the other thread kept running meanwhile.
        assert stall < STALL, f"{name} held the GIL: the ticking thread stalled {stall:.3f}s"
    finally:
        cleanup()


def test_closing_a_buffer_waits_for_copies_on_other_threads(kind):
    """A ``read`` running on another thread (GIL released) is not a DLPack view:
    ``close()`` waits for it instead of raising ``BufferInUseError``, the read returns
    the bytes, and the reads after it raise ``ClosedError``."""
    rt = devipc.Runtime.emulated(kind)
    size = 8 << 20
    for attempt in range(16):
        buf = rt.allocate(size)
        buf.write(bytes([attempt]) * size)
        expected = bytes([attempt]) * size
        wrong: list[int] = []
        outcome: list[BaseException] = []
        started, stop = threading.Event(), threading.Event()

        def reader():
            try:
                while not stop.is_set():
                    started.set()
                    if buf.read() != expected:
                        wrong.append(1)
            except devipc.errors.ClosedError as e:
                outcome.append(e)
            except BaseException as e:  # noqa: BLE001 - checked below
                outcome.append(e)

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        started.wait(10)
        time.sleep(0.001 * (attempt % 5))
        closing = time.monotonic()
        try:
            buf.close()  # raised BufferInUseError ("1 DLPack view") during a read
        except BaseException:
            stop.set()
            raise
        # It waits for the read under way, not for a pause in the reads.
        assert time.monotonic() - closing < 5
        t.join(30)
        assert not t.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], devipc.errors.ClosedError), outcome
        assert not wrong


def test_share_server_close_stops_an_accept_on_another_thread(kind, tmp_path):
    """``ShareServer.close()`` ends an ``accept()`` running on another thread
    (``ClosedError``): once it returned the socket is gone and no importer is served."""
    rt = devipc.Runtime.emulated(kind)
    path = tmp_path / "share.sock"
    with rt.allocate(4096) as buf:
        server = buf.share(path, any_process=True)
        outcome: list[BaseException | dict] = []

        def accept():
            try:
                outcome.append(server.accept())
            except BaseException as e:  # noqa: BLE001 - checked below
                outcome.append(e)

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        time.sleep(0.2)
        server.close()
        assert not path.exists(), "the socket outlived close()"
        t.join(5)
        assert not t.is_alive(), "accept() kept serving after close()"
        assert len(outcome) == 1 and isinstance(outcome[0], devipc.errors.ClosedError), outcome
        peer = devipc.Runtime.emulated(kind)
        with pytest.raises(devipc.DevipcError):
            peer.connect(path, timeout=0.5)
        peer.close()


def test_signal_close_ends_a_wait_on_another_thread(kind):
    """``Signal.close()`` ends a ``wait()`` on another thread (``ClosedError``) within a
    slice, instead of leaving it waiting for a notify that can no longer come."""
    rt = devipc.Runtime.emulated(kind)
    sig = rt.create_signal()
    outcome: list[BaseException | None] = []

    def wait():
        try:
            sig.wait()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - checked below
            outcome.append(e)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    time.sleep(0.2)
    started = time.monotonic()
    sig.close()
    t.join(5)
    assert not t.is_alive(), "wait() went on after close()"
    assert time.monotonic() - started < 1.0
    assert len(outcome) == 1 and isinstance(outcome[0], devipc.errors.ClosedError), outcome
