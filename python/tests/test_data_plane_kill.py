"""``kill -9`` of either side with copies in flight, from Python on both emulated
backends: the importer dies with its copy out of the exporter's buffer queued behind a
held stream (the exporter then frees; the next process reclaims the dead one's holds), and
the exporter dies while this process's copy out of its buffer is queued (the import keeps
the memory: the copy completes with the exporter's bytes). The autouse fixture asserts
that no violation was recorded and nothing was left behind."""

from __future__ import annotations

import os
import signal

import devipc
import devipc.testing
import roles
from dataplane import pattern, reclaim_dead

N = 1 << 20


def test_killing_the_importer_with_a_copy_in_flight_is_reclaimed(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(N)
    buf.write(pattern(N, 3))
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.held_copier, args=(kind, inbox, outbox))
    child.start()
    try:
        assert isinstance(outbox.get(timeout=60), int)
        inbox.put((buf.export(any_process=True), N))
        got = outbox.get(timeout=60)
        assert got == ("in-flight", False), got
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
        # The exporter frees at once: the dead importer's hold is the driver's to reclaim.
        buf.close()
        rt.close()
        reclaim_dead(kind, ctx)
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_killing_the_exporter_while_a_copy_from_it_is_in_flight(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.exporter_until_killed, args=(kind, N, outbox))
    child.start()
    try:
        token = outbox.get(timeout=60)
        assert isinstance(token, str), token
        imp = rt.import_buffer(token)
        local = rt.allocate(N)
        stream = rt.create_stream()
        devipc.testing.hold_stream(stream)
        copy = stream.copy(local.span(0, N), imp.span(0, N))
        os.kill(child.pid, signal.SIGKILL)
        child.join(30)
        assert not copy.is_complete()
        devipc.testing.release_stream(stream)
        copy.wait(20)
        assert local.read(0, N) == pattern(N, 9), "the import kept the dead exporter's bytes"
        imp.close()
        local.close()
        del copy, stream
        assert devipc.testing.wait_for_drained(10)
        rt.close()
        reclaim_dead(kind, ctx)
    finally:
        if child.is_alive():
            child.kill()
            child.join()
