"""``fork`` after a runtime started (``multiprocessing``'s default start method on Linux
before Python 3.14): the child's use of anything it inherited (the runtime, a buffer, a
signal) is refused with ``InheritedAcrossForkError``, closing it there releases nothing
of the parent's, and a runtime of the child's own works and imports the parent's
exports as any other process does. The parent's objects are intact afterwards: its
buffer's free still waits for the child's import while the child holds it."""

from __future__ import annotations

import multiprocessing
import threading
import time

import devipc

BLOCK = 1 << 16


def _inherited(call) -> str | None:
    """None when `call` is refused as inherited across fork, else what happened."""
    try:
        call()
    except devipc.errors.InheritedAcrossForkError as e:
        return None if e.kind == "inherited_across_fork" else f"kind {e.kind}"
    except Exception as e:  # noqa: BLE001 - reported to the parent, which asserts
        return f"{type(e).__name__}: {e}"
    return "an inherited object worked in the forked child"


def _forked_child(kind, rt, buf, signal, token, outbox, inbox):
    try:
        for name, call in [
            ("allocate", lambda: rt.allocate(4096)),
            ("export", lambda: buf.export(any_process=True)),
            ("read", lambda: buf.read(0, 1)),
            ("write", lambda: buf.write(b"x")),
            ("import_buffer", lambda: rt.import_buffer(token)),
            ("create_signal", lambda: rt.create_signal()),
            ("notify", lambda: signal.notify()),
        ]:
            wrong = _inherited(call)
            if wrong is not None:
                outbox.put(f"{name}: {wrong}")
                return
        own = devipc.Runtime.emulated(kind)
        view = own.import_buffer(token)
        if view.read(0, 6) != b"parent":
            outbox.put("the child read other bytes than the parent wrote")
            return
        mine = own.allocate(4096)
        mine.export(any_process=True)
        outbox.put("holding")
        inbox.get(timeout=120)
        # Closing what it inherited releases nothing of the parent's.
        buf.close()
        signal.close()
        rt.close()
        view.close()
        mine.close()
        own.close()
        outbox.put("ok")
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which asserts
        outbox.put(f"{type(e).__name__}: {e}")


def test_a_forked_child_refuses_inherited_objects_and_works_with_its_own_runtime(kind):
    ctx = multiprocessing.get_context("fork")
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(BLOCK)
    buf.write(b"parent")
    token = buf.export(any_process=True)
    signal = rt.create_signal()
    outbox, inbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=_forked_child, args=(kind, rt, buf, signal, token, outbox, inbox))
    child.start()
    try:
        assert outbox.get(timeout=120) == "holding"
        # The parent's objects still work while the child holds its import.
        assert buf.read(0, 6) == b"parent"
        signal.notify()
        signal.wait(timeout=10)
        inbox.put("go")
        assert outbox.get(timeout=120) == "ok"
        child.join(60)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    # Still the parent's: the child's closes released nothing.
    assert buf.read(0, 6) == b"parent"
    buf.export(any_process=True)
    signal.close()
    buf.close()
    rt.close()


def _close_inherited(signal, outbox):
    try:
        started = time.monotonic()
        signal.close()
        outbox.put(("closed", time.monotonic() - started))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which asserts
        outbox.put((f"{type(e).__name__}: {e}", 0.0))


def test_a_forked_child_closes_what_a_parent_thread_was_waiting_on(kind):
    """A thread of the parent sits in ``wait()`` when the process forks: in the child that
    wait never ends (the thread does not exist there), so closing the inherited signal
    must not wait for it."""
    ctx = multiprocessing.get_context("fork")
    rt = devipc.Runtime.emulated(kind)
    signal = rt.create_signal()
    waiting = threading.Thread(target=lambda: signal.wait(timeout=30))
    waiting.start()
    time.sleep(0.2)
    outbox = ctx.Queue()
    child = ctx.Process(target=_close_inherited, args=(signal, outbox))
    child.start()
    try:
        what, took = outbox.get(timeout=60)
        assert what == "closed", what
        assert took < 5, took
        child.join(60)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    # The parent's wait still ends on the parent's notify.
    signal.notify()
    waiting.join(30)
    assert not waiting.is_alive()
    signal.close()
    rt.close()
