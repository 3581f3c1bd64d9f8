"""Issue 16 from Python: a token names its device's physical identity, so a consumer
under another visibility mask finds the exporter's device (``Runtime.local_device_of``,
``Runtime.import_on_exporter_device``). The emulated machine has four devices; the
producer sees physical {2,3} as {0,1}, the consumer {3,2}, a third process {0,1}."""

from __future__ import annotations

import os
import tempfile

import roles
from conftest import sweep_dead_beacons

MASK = {"ascend": "ASCEND_RT_VISIBLE_DEVICES", "hip": "HIP_VISIBLE_DEVICES"}


def start(ctx, kind, target, mask, machine):
    """Starts `target` with `mask` on the four-device emulated machine in `machine` (its
    own state directories: processes sharing one must agree on the device count; a
    spawned child copies the environment when it starts)."""
    inbox, outbox = ctx.Queue(), ctx.Queue()
    env = {
        MASK[kind]: mask,
        "DEVIPC_EMU_DEVICES": "4",
        "DEVIPC_EMU_DIR": os.path.join(machine, "emu"),
        "DEVIPC_RUNTIME_DIR": os.path.join(machine, "run"),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        child = ctx.Process(target=target, args=(kind, inbox, outbox))
        child.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return child, inbox, outbox


def test_import_lands_on_the_exporters_physical_device_under_other_masks(kind, ctx):
    machine = tempfile.mkdtemp(prefix="devipc-py-4dev-")
    for d in ("emu", "run"):
        os.mkdir(os.path.join(machine, d), 0o700)
    producer, p_in, p_out = start(ctx, kind, roles.placement_producer, "2,3", machine)
    token = p_out.get(timeout=60)
    assert isinstance(token, str), token
    results = []
    for mask in ("3,2", "0,1"):
        consumer, c_in, c_out = start(ctx, kind, roles.placement_consumer, mask, machine)
        pid = c_out.get(timeout=60)
        assert isinstance(pid, int), pid
        p_in.put(pid)
        assert p_out.get(timeout=60) == "granted"
        c_in.put(token)
        results.append(c_out.get(timeout=60))
        consumer.join(60)
        assert consumer.exitcode == 0
    p_in.put(None)
    producer.join(60)
    assert producer.exitcode == 0
    # The producer's device 1 is physical 3: the consumer's device 0.
    assert results[0] == (0, 0, b"on device 3"), results
    # Physical 3 is hidden from the third process.
    assert results[1] == (None, "DeviceNotVisibleError"), results
    sweep_dead_beacons(os.path.join(machine, "emu"))
    leftovers = [n for n in os.listdir(os.path.join(machine, "emu")) if n != "ledger"]
    assert leftovers == [], leftovers
