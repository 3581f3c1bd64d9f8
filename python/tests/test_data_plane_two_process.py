"""The data plane across two real processes (spawn), on both emulated backends: the
importer copies out of an import with the copies in flight while the exporter drops its
buffer and while the importer closes its import; the bytes arrive exact, nothing waits,
and the emulator records no violation (the autouse fixture checks the ledger)."""

from __future__ import annotations

import devipc
import roles
from dataplane import pattern


def test_an_importers_copies_survive_the_exporters_drop_and_its_own_close(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.copier, args=(kind, inbox, outbox))
    child.start()
    try:
        peer = outbox.get(timeout=60)
        assert isinstance(peer, int), peer
        n = 8 << 20
        buf = rt.allocate(n)
        buf.write(pattern(n, 13))
        token = buf.export()
        buf.grant(token, [peer])
        inbox.put((token, n, 13))
        got = outbox.get(timeout=60)
        assert got[0] == "closed", got
        _, in_flight_at_close, closed_in = got
        assert in_flight_at_close, "the gate held the copies in flight through the close"
        assert closed_in < 0.05, f"closing the import waited {closed_in:.3f}s for the copies"
        # The exporter drops its buffer while the peer's copies from it are still queued:
        # close() returns, and the memory stays until the importer's copies and mapping
        # are gone.
        buf.close()
        inbox.put("dropped")
        done = outbox.get(timeout=120)
        assert done[0] == "done", done
        assert done[1], "the copies were still queued when the exporter dropped its buffer"
        assert done[3], "the copies through the closed import delivered the exporter's bytes"
        child.join(60)
        assert child.exitcode == 0
    finally:
        if child.is_alive():
            child.kill()
            child.join()
