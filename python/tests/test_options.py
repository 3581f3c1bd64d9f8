"""The options objects (``ExportOptions``, ``AllocateOptions``, ``ShareOptions``,
``ConnectOptions``): Rust's options types with the builder methods as keyword arguments,
accepted where Rust takes them; the flag arguments stay as a shorthand, never together
with an options object."""

from __future__ import annotations

import pytest

import devipc
import roles


def test_the_options_have_rusts_defaults_and_compare_by_value():
    assert devipc.ExportOptions().any_process is False
    assert devipc.ExportOptions(any_process=True) == devipc.ExportOptions(any_process=True)
    assert devipc.ExportOptions() != devipc.ExportOptions(any_process=True)
    assert devipc.AllocateOptions().mechanism is None
    assert devipc.AllocateOptions(mechanism="hip-vmm-fd").mechanism == "hip-vmm-fd"
    share = devipc.ShareOptions()
    assert (share.export_options, share.io_timeout, share.allow_uids, share.socket_mode) == (
        devipc.ExportOptions(), None, [], 0o600
    )
    connect = devipc.ConnectOptions()
    assert (connect.timeout, connect.wait_for_server, connect.allow_uids) == (30.0, False, [])
    assert repr(devipc.ExportOptions(any_process=True)) == "ExportOptions(any_process=True)"
    assert repr(connect) == "ConnectOptions(timeout=30.0, wait_for_server=False, allow_uids=[])"
    # Keyword arguments only, checked when made.
    with pytest.raises(TypeError):
        devipc.ExportOptions(True)
    with pytest.raises(TypeError):
        devipc.ExportOptions(any_proces=True)
    with pytest.raises(devipc.errors.InvalidArgumentError, match="unknown memory mechanism"):
        devipc.AllocateOptions(mechanism="hip-ipc-event")
    for bad in (-1.0, float("nan")):
        with pytest.raises(devipc.errors.InvalidArgumentError):
            devipc.ConnectOptions(timeout=bad)
        with pytest.raises(devipc.errors.InvalidArgumentError):
            devipc.ShareOptions(io_timeout=bad)


def test_an_options_object_and_a_flag_are_not_both_taken(kind, tmp_path):
    rt = devipc.Runtime.emulated(kind)
    anyone = devipc.ExportOptions(any_process=True)
    with rt.allocate(4096) as buf, rt.create_signal() as sig:
        for call in (
            lambda: buf.export(options=anyone, any_process=True),
            lambda: buf.export(0, None, anyone, any_process=False),
            lambda: sig.export(anyone, any_process=True),
            lambda: rt.export_external(buf.ptr, 64, 0, anyone, any_process=True),
            lambda: buf.share(tmp_path / "s.sock", options=devipc.ShareOptions(), io_timeout=1.0),
            lambda: rt.connect(tmp_path / "s.sock", options=devipc.ConnectOptions(), timeout=1.0),
        ):
            with pytest.raises(devipc.errors.InvalidArgumentError, match="not both"):
                call()
        # The flags stay keyword-only.
        with pytest.raises(TypeError):
            sig.export(None, True)


def test_export_options_decide_who_may_import(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    # Ascend allows one shareable handle per allocation: one buffer per kind of export.
    with rt.allocate(4096) as buf, rt.allocate(4096) as private:
        for token in (
            buf.export(options=devipc.ExportOptions(any_process=True)),
            buf.export(any_process=True),
        ):
            outbox = ctx.Queue()
            child = ctx.Process(target=roles.importer, args=(kind, token, outbox))
            child.start()
            got = outbox.get(timeout=60)
            child.join(60)
            assert got == ("imported",), got
        if kind == "ascend":
            # Ascend checks the importer's pid against the export's trustlist; HIP has no
            # access control.
            for token in (private.export(options=devipc.ExportOptions()), private.export()):
                outbox = ctx.Queue()
                child = ctx.Process(target=roles.importer, args=(kind, token, outbox))
                child.start()
                got = outbox.get(timeout=60)
                child.join(60)
                assert got[0] == "error", got


def test_allocate_options_name_the_mechanism(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(4096, 0, devipc.AllocateOptions()) as buf:
        default = devipc.token_info(buf.export())["mechanism"]
    with rt.allocate(4096) as buf:
        assert devipc.token_info(buf.export())["mechanism"] == default
    if kind == "hip":
        for mechanism in ("hip-ipc-mem", "hip-vmm-fd"):
            options = devipc.AllocateOptions(mechanism=mechanism)
            with rt.allocate(4096, options=options) as buf:
                assert devipc.token_info(buf.export())["mechanism"] == mechanism
    # Ascend makes memory one way only; no backend makes the other vendor's.
    other = ["ascend-vmm", "ascend-ipc-key"] + (["hip-ipc-mem"] if kind == "ascend" else [])
    for mechanism in other:
        with pytest.raises(devipc.errors.UnsupportedError):
            rt.allocate(4096, options=devipc.AllocateOptions(mechanism=mechanism))


def test_share_and_connect_take_their_options(kind, ctx, tmp_path):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    buf.write(b"ping")
    done = rt.create_signal()
    path = str(tmp_path / "buf.sock")
    options = devipc.ShareOptions(io_timeout=30.0, socket_mode=0o600)
    with buf.share(path, [done], options) as server:
        outbox = ctx.Queue()
        child = ctx.Process(target=roles.connector, args=(kind, path, outbox, True))
        child.start()
        try:
            server.accept(timeout=60)
            got = outbox.get(timeout=60)
            assert got[:2] == ("connected", b"ping"), got
            done.wait(timeout=30)
            assert buf.read(0, 4) == b"pong"
            child.join(60)
            assert child.exitcode == 0
        finally:
            if child.is_alive():
                child.kill()
                child.join()
    done.close()
    buf.close()
