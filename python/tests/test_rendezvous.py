"""The Unix-socket rendezvous from Python: `SharedBuffer.share` in one process,
`Runtime.connect` in another (the server grants the importer itself)."""

from __future__ import annotations

import os

import devipc
import roles


def test_share_and_connect_across_processes(kind, ctx, tmp_path):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    buf.write(b"ping")
    done = rt.create_signal()
    path = str(tmp_path / "buf.sock")
    with buf.share(path, signals=[done]) as server:
        assert server.path == path and server.token
        outbox = ctx.Queue()
        child = ctx.Process(target=roles.connector, args=(kind, path, outbox))
        child.start()
        try:
            peer = server.accept(timeout=60)
            assert peer["pid"] == child.pid
            got = outbox.get(timeout=60)
            assert got == ("connected", b"ping", os.getpid(), 1), got
            done.wait(timeout=30)
            assert buf.read(0, 4) == b"pong"
            child.join(60)
            assert child.exitcode == 0
        finally:
            if child.is_alive():
                child.kill()
                child.join()
    assert not os.path.exists(path)
    # Nobody connects: accept times out with the right class.
    with buf.share(path) as server:
        try:
            server.accept(timeout=0.2)
            raise AssertionError("accept returned without an importer")
        except devipc.errors.TimedOutError:
            pass
    done.close()
    buf.close()
