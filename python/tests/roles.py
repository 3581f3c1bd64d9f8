"""What the child processes of the tests run (top-level functions, so that the ``spawn``
start method can find them). Each talks to the parent through two queues: ``inbox``
(parent to child) and ``outbox`` (child to parent); a failure is reported as
``("error", class name, text)``."""

from __future__ import annotations

import os
import signal
import time
import traceback

import numpy as np

import devipc
import devipc.arrays


def _report(outbox, fn, *args):
    try:
        fn(*args)
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which asserts
        outbox.put(("error", type(e).__name__, f"{e}\n{traceback.format_exc()}"))


def consumer(kind, inbox, outbox):
    """Imports a buffer and two signals; waits for `ready`, reads through numpy, writes
    `b"world"` through the view, notifies `done`."""
    _report(outbox, _consumer, kind, inbox, outbox)


def _consumer(kind, inbox, outbox):
    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    token, ready_token, done_token = inbox.get()
    buf = rt.import_buffer(token)
    ready = rt.import_signal(ready_token)
    done = rt.import_signal(done_token)
    ready.wait(timeout=20)
    view = np.from_dlpack(buf)
    assert view.__array_interface__["data"][0] == buf.ptr, "not a zero-copy view"
    outbox.put(("seen", bytes(view[:5]), int(view[-1]), rt.vendor_imports()))
    view[:5] = np.frombuffer(b"world", dtype=np.uint8)
    del view
    done.notify()
    assert inbox.get() == "bye"
    buf.close()
    outbox.put(("closed",))


def descriptor_consumer(kind, inbox, outbox):
    """Rebuilds a descriptor's arrays, checks them against the expected values, reports
    the vendor imports it made and the time per tensor."""
    _report(outbox, _descriptor_consumer, kind, inbox, outbox)


def _descriptor_consumer(kind, inbox, outbox):
    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    desc = inbox.get()
    before = rt.vendor_imports()
    t0 = time.perf_counter()
    arrays = devipc.arrays.rebuild(rt, desc)
    elapsed = time.perf_counter() - t0
    imports = rt.vendor_imports() - before
    live = rt.live_imports()
    wrong = [i for i, a in enumerate(arrays) if not np.all(a == i % 251)]
    shapes = {a.shape for a in arrays}
    outbox.put(("rebuilt", len(arrays), imports, live, wrong, sorted(shapes), elapsed))
    assert inbox.get() == "bye"
    del arrays
    outbox.put(("closed", rt.live_imports()))


def importer(kind, token, outbox):
    """Imports `token` and reports the outcome (the exception's class and fields)."""
    try:
        rt = devipc.Runtime.emulated(kind)
        rt.import_buffer(token)
        outbox.put(("imported",))
    except devipc.DevipcError as e:
        outbox.put(("error", type(e).__name__, e.kind, str(e)))


def import_loop(kind, inbox, outbox):
    """Sends its process id, then imports and closes the token it is given in a loop
    until killed."""
    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    token = inbox.get()
    outbox.put("looping")
    while True:
        buf = rt.import_buffer(token)
        buf.read(0, 8)
        buf.close()


def sweeper(kind, outbox):
    """Starts the emulator (which reclaims what dead processes left) and exits."""
    devipc.Runtime.emulated(kind).close()
    outbox.put("swept")


def interrupted_wait(kind, outbox):
    """Waits on a signal nobody raises, without a timeout; reports whether Ctrl-C
    (SIGINT) ended the wait with KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rt = devipc.Runtime.emulated(kind)
    s = rt.create_signal()
    outbox.put(("waiting", os.getpid()))
    t0 = time.monotonic()
    try:
        s.wait()
        outbox.put(("returned",))
    except KeyboardInterrupt:
        outbox.put(("interrupted", time.monotonic() - t0))
    s.close()


def connector(kind, path, outbox, with_options=False):
    """Connects to the rendezvous at `path` (with a `ConnectOptions` if `with_options`,
    else with the flags), reads the buffer, writes back, notifies the signal it
    received."""
    _report(outbox, _connector, kind, path, outbox, with_options)


def _connector(kind, path, outbox, with_options):
    rt = devipc.Runtime.emulated(kind)
    if with_options:
        options = devipc.ConnectOptions(timeout=30, wait_for_server=True)
        got = rt.connect(path, 0, options)
    else:
        got = rt.connect(path, timeout=30, wait_for_server=True)
    view = np.from_dlpack(got.buffer)
    outbox.put(("connected", bytes(view[:4]), got.pid, len(got.signals)))
    view[:4] = np.frombuffer(b"pong", dtype=np.uint8)
    del view
    got.signals[0].notify()


def torch_consumer(kind, inbox, outbox):
    """Rebuilds a descriptor's tensors with torch.from_dlpack and checks them."""
    _report(outbox, _torch_consumer, kind, inbox, outbox)


def _torch_consumer(kind, inbox, outbox):
    import torch

    import devipc.torch

    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    desc = inbox.get()
    before = rt.vendor_imports()
    tensors = devipc.torch.rebuild(rt, desc)
    wrong = [i for i, t in enumerate(tensors) if not bool(torch.all(t == i % 251))]
    tensors[1][0, 0] = -1.0  # written through to the producer's memory
    outbox.put(("rebuilt", len(tensors), rt.vendor_imports() - before, wrong,
                [tuple(t.stride()) for t in tensors[:2]]))
    assert inbox.get() == "bye"
    del tensors
    outbox.put(("closed", rt.live_imports()))


def placement_producer(kind, inbox, outbox):
    """On its device 1 (under the parent's mask): allocates, writes `b"on device 3"`,
    exports; says the token; grants each pid it is sent; `None` ends it."""
    _report(outbox, _placement_producer, kind, inbox, outbox)


def _placement_producer(kind, inbox, outbox):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(1 << 20, device=1)
    buf.write(b"on device 3")
    token = buf.export()
    outbox.put(token)
    while (pid := inbox.get()) is not None:
        rt.grant(token, [pid])
        outbox.put("granted")
    buf.close()


def placement_consumer(kind, inbox, outbox):
    """Says its pid; for the token it is sent, says where `local_device_of` places it and
    what `import_on_exporter_device` reads there (or the exception's class)."""
    _report(outbox, _placement_consumer, kind, inbox, outbox)


def _placement_consumer(kind, inbox, outbox):
    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    token = inbox.get()
    local = rt.local_device_of(token)
    try:
        buf = rt.import_on_exporter_device(token)
    except devipc.DevipcError as e:
        outbox.put((local, type(e).__name__))
        return
    outbox.put((local, buf.device, buf.read(0, 11)))
    buf.close()


def external_reader(kind, inbox, outbox):
    """Imports the token it is sent and says the first bytes; closes the import on
    `close` (says `closed`); `None` ends it."""
    _report(outbox, _external_reader, kind, inbox, outbox)


def _external_reader(kind, inbox, outbox):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.import_buffer(inbox.get())
    outbox.put(("read", bytes(buf.read(0, 16))))
    assert inbox.get() == "close"
    buf.close()
    outbox.put("closed")
    assert inbox.get() is None


def copier(kind, inbox, outbox):
    """Imports a buffer and copies it out on a stream held busy by a gate, so that the
    copy is in flight when this process closes its import and (as long as the gate
    lasts) when the exporter drops its buffer; reports whether it was, and whether the
    bytes arrived exact."""
    _report(outbox, _copier, kind, inbox, outbox)


def _copier(kind, inbox, outbox):
    from dataplane import Gate, pattern

    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    token, n, seed = inbox.get()
    imported = rt.import_buffer(token)
    local = rt.allocate(n)
    stream = rt.create_stream()
    # The gate holds the stream: the copies stay queued until it closes.
    gate = Gate(rt, stream)
    copy = stream.copy(local, imported.span(0, n))
    read = stream.read(imported.span(0, 4096))
    # This process closes its import with the copies in flight (the close does not wait
    # for them; they keep the mapping until they ran), then the exporter drops its buffer.
    started = time.perf_counter()
    imported.close()
    closed_in = time.perf_counter() - started
    outbox.put(("closed", not copy.is_complete(), closed_in))
    assert inbox.get(timeout=60) == "dropped"
    still = not copy.is_complete()
    gate.close()
    copy.wait(timeout=60)
    exact = local.read() == pattern(n, seed) and read.result(timeout=60) == pattern(n, seed)[:4096]
    outbox.put(("done", still, closed_in, exact))
    local.close()


def generation_consumer(kind, inbox, outbox):
    """Imports a signal with generations and a buffer; waits for generations 1 and 2 on
    its stream, tries 3 with a short timeout, copies the buffer after 2 and reports
    ``("waited", error class of the wait for 3, the bytes)``; then waits to be killed."""
    _report(outbox, _generation_consumer, kind, inbox, outbox)


def _generation_consumer(kind, inbox, outbox):
    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    sig_token, buf_token, n = inbox.get()
    sig = rt.import_signal(sig_token)
    buf = rt.import_buffer(buf_token)
    stream = rt.create_stream()
    local = rt.allocate(n)
    sig.wait_for(stream, 1, timeout=20)
    sig.wait_for(stream, 2, timeout=20)
    copy = stream.copy(local.span(0, n), buf.span(0, n))
    try:
        sig.wait_for(stream, 3, timeout=0.2)
        early = "none"
    except devipc.errors.TimedOutError as e:
        early = type(e).__name__
    copy.wait(20)
    outbox.put(("waited", early, local.read(0, n)))
    time.sleep(600)


def held_copier(kind, inbox, outbox):
    """Imports a buffer, holds its stream, queues a copy out of the import and reports
    ``("in-flight", complete?)``; then waits to be killed."""
    _report(outbox, _held_copier, kind, inbox, outbox)


def _held_copier(kind, inbox, outbox):
    import devipc.testing

    rt = devipc.Runtime.emulated(kind)
    outbox.put(rt.process_id)
    token, n = inbox.get()
    imp = rt.import_buffer(token)
    local = rt.allocate(n)
    stream = rt.create_stream()
    devipc.testing.hold_stream(stream)
    copy = stream.copy(local.span(0, n), imp.span(0, n))
    outbox.put(("in-flight", copy.is_complete()))
    time.sleep(600)


def exporter_until_killed(kind, n, outbox):
    """Allocates `n` bytes of pattern seed 9, exports them to any process, sends the token
    and waits to be killed."""
    _report(outbox, _exporter_until_killed, kind, n, outbox)


def _exporter_until_killed(kind, n, outbox):
    from dataplane import pattern

    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(n)
    buf.write(pattern(n, 9))
    outbox.put(buf.export(any_process=True))
    time.sleep(600)


def exporting_sweeper(kind, outbox):
    """Starts the emulator, exports once (the first export of a process sweeps the
    export records of dead exporters) and creates a signal (the first one sweeps the
    signal words of dead creators), then exits."""
    rt = devipc.Runtime.emulated(kind)
    rt.create_signal().close()
    buf = rt.allocate(4096)
    buf.export(any_process=True)
    buf.close()
    rt.close()
    outbox.put("swept")
