"""Bad input and misuse give the right exception class, never a crash: garbage tokens,
the wrong backend, a freed token, closed objects, views outliving their buffer, Ctrl-C
during a wait, and a consumer killed while importing."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time

import numpy as np
import pytest

import devipc
import roles
from conftest import leftovers

GARBAGE = [
    "",
    "garbage",
    "devipc2:",
    "devipc2:!!!!",
    "devipc2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "devipc1:" + "A" * 200,
    "devipc9:" + "A" * 200,
    "\x00\xff",
    "x" * 100_000,
]


def test_garbage_token_strings_are_invalid_token_errors(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(4096) as buf:
        real = buf.export()
        # A real token with one character changed: the checksum catches it.
        i = len(real) // 2
        flipped = real[:i] + ("A" if real[i] != "A" else "B") + real[i + 1 :]
        for text in [*GARBAGE, flipped, real[:-4]]:
            for call in (rt.import_buffer, rt.import_signal, devipc.token_info):
                with pytest.raises(devipc.errors.InvalidTokenError) as e:
                    call(text)
                assert e.value.kind == "invalid_token"
                assert e.value.details["reason"]
                assert isinstance(e.value, devipc.DevipcError)
        with pytest.raises(TypeError):
            rt.import_buffer(b"bytes are not tokens")
        # A memory token is not a signal token, and the reverse.
        with pytest.raises(devipc.DevipcError):
            rt.import_signal(real)
        s = rt.create_signal()
        with pytest.raises(devipc.DevipcError):
            rt.import_buffer(s.export())
        s.close()


def test_a_token_of_the_other_backend_is_a_backend_mismatch(kind):
    other = "hip" if kind == "ascend" else "ascend"
    rt, wrong = devipc.Runtime.emulated(kind), devipc.Runtime.emulated(other)
    with rt.allocate(4096) as buf:
        with pytest.raises(devipc.errors.BackendMismatchError) as e:
            wrong.import_buffer(buf.export())
        assert e.value.details["expected"] and e.value.details["found"]
        s = rt.create_signal()
        with pytest.raises(devipc.errors.BackendMismatchError):
            wrong.import_signal(s.export())
        s.close()


def test_a_freed_buffers_token_is_refused_in_another_process(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    token = buf.export(any_process=True)
    buf.close()
    outbox = ctx.Queue()
    child = ctx.Process(target=roles.importer, args=(kind, token, outbox))
    child.start()
    got = outbox.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert got[0] == "error", got
    # Refused before any vendor call: the export's record is gone with the memory.
    assert got[1:3] == ("InvalidArgumentError", "invalid_argument"), got
    assert "freed" in got[3], got
    # And in this process (the same-process shortcut has nothing to serve).
    with pytest.raises(devipc.errors.InvalidArgumentError, match="freed"):
        rt.import_buffer(token)


def test_closed_objects_raise_closed_error_and_double_close_is_harmless(kind):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    s = rt.create_signal()
    rt.close()
    rt.close()
    assert rt.closed
    for call in (
        lambda: rt.allocate(64),
        lambda: rt.import_buffer("garbage"),
        lambda: rt.create_signal(),
        lambda: rt.process_id,
        lambda: rt.live_imports(),
    ):
        with pytest.raises(devipc.errors.ClosedError) as e:
            call()
        assert e.value.kind == "closed"
    # What the runtime made stays usable (it holds the backend), until closed itself.
    buf.write(b"still here")
    assert buf.read(0, 10) == b"still here"
    s.notify()
    s.wait(timeout=5)
    buf.close()
    buf.close()
    s.close()
    s.close()
    for call in (lambda: buf.read(), lambda: buf.export(), lambda: np.from_dlpack(buf), lambda: len(buf)):
        with pytest.raises(devipc.errors.ClosedError):
            call()
    with pytest.raises(devipc.errors.ClosedError):
        s.wait(timeout=0)


def test_a_view_outlives_its_buffer_object_and_close_waits_for_views(kind):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    buf.write(b"kept alive")
    arr = np.from_dlpack(buf)
    unconsumed = buf.view("uint8", [4])
    with pytest.raises(devipc.errors.BufferInUseError) as e:
        buf.close()
    assert "2 DLPack view(s)" in str(e.value)
    del unconsumed
    with pytest.raises(devipc.errors.BufferInUseError):
        buf.close()
    # Dropping the buffer object does not free memory a view still uses.
    del buf
    import gc

    gc.collect()
    assert bytes(arr[:10]) == b"kept alive"
    arr[:4] = 0
    assert leftovers() != [], "the allocation must still exist while the view lives"
    del arr
    gc.collect()
    # (the autouse fixture checks the memory was released)


def test_out_of_range_copies_and_views_are_invalid_argument_errors(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(4096) as buf:
        n = len(buf)
        for call in (
            lambda: buf.read(n + 1),
            lambda: buf.read(n - 2, 3),
            lambda: buf.write(b"xy", offset=n - 1),
            lambda: buf.view("float32", [n]),
            lambda: buf.view("float32", [2], offset=n - 4),
            lambda: buf.view("float32", [-1]),
            lambda: buf.view("float32", [2, 2], strides=[1]),
            lambda: buf.view("nonsense", [1]),
            lambda: buf.export(offset=n, size=1),
        ):
            with pytest.raises(devipc.DevipcError):
                call()
        with pytest.raises(devipc.errors.InvalidArgumentError):
            buf.write(object())
        with pytest.raises(devipc.errors.InvalidArgumentError):
            buf.write(np.arange(8)[::2])
        with pytest.raises(OverflowError):
            buf.read(-1)
        with pytest.raises(devipc.errors.InvalidDeviceError):
            rt.allocate(64, device=99)
        s = rt.create_signal()
        for t in (-1, float("nan"), float("inf"), 1e300):
            with pytest.raises(devipc.errors.InvalidArgumentError):
                s.wait(timeout=t)
        s.close()
        # Sizes and shapes past any buffer (and past i64 arithmetic) are refused, not
        # allocated or wrapped around.
        for call in (
            lambda: buf.read(0, 1 << 62),
            lambda: buf.view("complex128", [1 << 62, 1 << 62], strides=[1 << 62, 1 << 62]),
            lambda: buf.view("uint8", [2, 2], strides=[-(1 << 62), 1], offset=8),
        ):
            with pytest.raises(devipc.errors.InvalidArgumentError):
                call()


def test_wait_releases_the_gil(kind):
    rt = devipc.Runtime.emulated(kind)
    s = rt.create_signal()
    result = []
    waiter = threading.Thread(target=lambda: result.append(s.wait(timeout=10)))
    t0 = time.monotonic()
    waiter.start()
    time.sleep(0.2)  # needs the GIL while the other thread waits
    s.notify()
    waiter.join(10)
    assert result == [None]
    assert time.monotonic() - t0 < 5
    with pytest.raises(devipc.errors.TimedOutError) as e:
        s.wait(timeout=0.05)
    assert e.value.details["after"] >= 0.05
    s.close()


def test_ctrl_c_interrupts_a_wait_without_timeout(kind, ctx):
    outbox = ctx.Queue()
    child = ctx.Process(target=roles.interrupted_wait, args=(kind, outbox))
    child.start()
    try:
        assert outbox.get(timeout=60)[0] == "waiting"
        time.sleep(0.3)
        os.kill(child.pid, signal.SIGINT)
        got = outbox.get(timeout=10)
        assert got[0] == "interrupted", got
        assert got[1] < 10
        child.join(30)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_killing_the_consumer_mid_import_leaves_nothing_behind(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(1 << 16)
    for attempt in range(3):
        inbox, outbox = ctx.Queue(), ctx.Queue()
        child = ctx.Process(target=roles.import_loop, args=(kind, inbox, outbox))
        child.start()
        peer = outbox.get(timeout=60)
        token = buf.export()
        buf.grant(token, [peer])
        inbox.put(token)
        assert outbox.get(timeout=60) == "looping"
        time.sleep(0.05 + 0.07 * attempt)
        child.kill()
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
    # The producer is unaffected and frees its memory.
    buf.write(b"fine")
    assert buf.read(0, 4) == b"fine"
    buf.close()
    # The next process to start the emulator reclaims what the dead ones held.
    outbox = ctx.Queue()
    sweeper = ctx.Process(target=roles.sweeper, args=(kind, outbox))
    sweeper.start()
    assert outbox.get(timeout=60) == "swept"
    sweeper.join(30)
    deadline = time.monotonic() + 10
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.05)
    # (the autouse fixture asserts nothing is left and no violation was recorded)


def test_exceptions_keep_the_vendor_fields_and_pickle(kind):
    with pytest.raises(devipc.DevipcError) as e:
        devipc.Runtime.open(kind)
    err = e.value
    assert err.kind in {"library_not_found", "vendor"}
    assert err.backend == kind
    if isinstance(err, devipc.errors.VendorError):
        assert isinstance(err.code, int) and err.name and err.api
    else:
        assert isinstance(err, devipc.errors.LibraryNotFoundError)
        assert err.details["tried"], err.details
        assert err.code is None and err.api is None
    with pytest.raises(devipc.DevipcError):
        devipc.Runtime.emulated("cuda")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
