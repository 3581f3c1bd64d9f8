"""Shared set-up of the Python tests.

Every test runs on both emulated backends (the ``kind`` fixture). The emulator's state
directory and devipc's runtime directory are private to this pytest run (set before
devipc is first used: the emulator reads them once per process; spawned children inherit
them), and after each test they must hold nothing but the emulator's ``ledger`` (no
object left behind, no violation recorded).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import tempfile

import pytest

_ROOT = tempfile.mkdtemp(prefix="devipc-py-")
os.environ["DEVIPC_EMU_DIR"] = os.path.join(_ROOT, "emu")
os.environ["DEVIPC_RUNTIME_DIR"] = os.path.join(_ROOT, "run")
for _d in (os.environ["DEVIPC_EMU_DIR"], os.environ["DEVIPC_RUNTIME_DIR"]):
    os.mkdir(_d, 0o700)
os.environ.pop("DEVIPC_BACKEND", None)
# The shell's device masks (meant for the machine's real devices) never renumber the
# emulated ones, unless asked to (the Rust test binaries do the same).
if os.environ.get("DEVIPC_TEST_KEEP_VISIBILITY") != "1":
    for _v in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"):
        os.environ.pop(_v, None)

KINDS = ["ascend", "hip"]


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    """The emulated backend under test: ``"ascend"`` or ``"hip"``."""
    return request.param


@pytest.fixture
def ctx():
    """The ``spawn`` multiprocessing context (what CUDA/ROCm/NPU frameworks need)."""
    return multiprocessing.get_context("spawn")


def _live_beacon(name: str) -> bool:
    """Whether `name` is the liveness beacon (``alive-<pid ns>-<pid>-<start time>``) of a
    process that still runs: this one, or a child not yet gone. A live process keeps its
    beacon while it lives (other pid namespaces judge it by it); a dead one's is a
    leftover."""
    parts = name.split("-")
    if len(parts) != 4 or parts[0] != "alive":
        return False
    pid, start = parts[2], parts[3]
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    # After the command name: field 3 (state) is fields[0], field 22 (start time) fields[19].
    return fields[0] not in ("Z", "X") and fields[19] == start


def sweep_dead_beacons(*dirs: str) -> None:
    """Removes from `dirs` (default: this run's emulator and runtime directories) the
    beacons of processes that are gone, as the next devipc process's sweep would: a
    process never removes its own (not even at exit, while its other threads may still
    use what it imported)."""
    for d in dirs or (os.environ["DEVIPC_EMU_DIR"], os.environ["DEVIPC_RUNTIME_DIR"]):
        for n in os.listdir(d):
            if n.startswith("alive-") and not _live_beacon(n):
                os.unlink(os.path.join(d, n))


def leftovers() -> list[str]:
    """Files in the emulator and runtime directories other than the emulator's ledger and
    the beacons of live processes."""
    emu = sorted(
        n for n in os.listdir(os.environ["DEVIPC_EMU_DIR"]) if n != "ledger" and not _live_beacon(n)
    )
    run = sorted(n for n in os.listdir(os.environ["DEVIPC_RUNTIME_DIR"]) if not _live_beacon(n))
    return [f"emu/{n}" for n in emu] + [f"run/{n}" for n in run]


def violations() -> str:
    path = os.path.join(os.environ["DEVIPC_EMU_DIR"], "violations")
    return open(path).read() if os.path.exists(path) else ""


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """After each test (its objects collected): no emulator object or runtime file is
    left, and the emulator recorded no violation."""
    yield
    gc.collect()
    sweep_dead_beacons()
    assert violations() == "", violations()
    assert leftovers() == []


_LOUD_SKIPS: list[str] = []


def loud_skip(test: str, reason: str) -> None:
    """Skips ``test`` (a ``SKIPPED <test>: <reason>`` banner is printed at the end of the
    run, past pytest's output capture), or fails when ``DEVIPC_NO_SKIP=1`` (CI installs
    every dependency)."""
    if os.environ.get("DEVIPC_NO_SKIP") == "1":
        pytest.fail(f"DEVIPC_NO_SKIP=1 forbids skipping: {test} cannot run here: {reason}")
    _LOUD_SKIPS.append(f"SKIPPED {test}: {reason}")
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter):
    """The loud-skip banners, one per skipped test."""
    rule = "*" * 78
    for line in _LOUD_SKIPS:
        terminalreporter.write_line("")
        terminalreporter.write_line(rule)
        terminalreporter.write_line(line)
        terminalreporter.write_line(rule)
