"""The package's surface: doctor(), lazy torch import, the stubs name what the module has."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import devipc
import devipc._devipc


def test_importing_devipc_torch_does_not_import_torch(tmp_path):
    code = "import sys, devipc.torch; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=tmp_path)


def test_dlpack_device_types_per_backend():
    # Real HIP memory is kDLROCM (10), real Ascend memory kDLExtDev (12, torch_npu's
    # PrivateUse1), both with the device index; the emulator's is host memory, kDLCPU.
    assert devipc._devipc._dlpack_device_for("hip", False, 3) == (10, 3)
    assert devipc._devipc._dlpack_device_for("ascend", False, 1) == (12, 1)
    assert devipc._devipc._dlpack_device_for("hip", True, 1) == (1, 0)
    assert devipc._devipc._dlpack_device_for("ascend", True, 0) == (1, 0)


def test_from_env_follows_devipc_backend(tmp_path):
    code = (
        "import devipc; rt = devipc.Runtime.from_env(); "
        "print(rt.backend, rt.emulated_backend, rt.take_release_errors())"
    )
    for choice, expected in (("emulated-hip", "hip True []"), ("emulated-ascend", "ascend True []")):
        env = dict(os.environ, DEVIPC_BACKEND=choice)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60, cwd=tmp_path, env=env)
        assert out.stdout.strip() == expected, out.stderr
    env = dict(os.environ, DEVIPC_BACKEND="cuda")
    code = ("import devipc\ntry:\n    devipc.Runtime.from_env()\n"
            "except devipc.InvalidArgumentError as e:\n    print('refused', e.kind)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env=env)
    assert out.stdout.strip() == "refused invalid_argument", (out.stdout, out.stderr)


def test_the_stubs_cover_every_public_name_of_the_extension():
    stubs = (pathlib.Path(devipc.__file__).parent / "_devipc.pyi").read_text()
    declared = set(re.findall(r"^(?:class|def) (\w+)", stubs, re.M))
    public = {n for n in dir(devipc._devipc) if not n.startswith("_")}
    assert public <= declared, public - declared
    assert set(devipc.__all__) >= public


def test_doctor_reports_every_backend():
    report = devipc.doctor()
    assert {(r["backend"], r["emulated"]) for r in report} == {
        ("ascend", False), ("ascend", True), ("hip", False), ("hip", True)
    }
    for r in report:
        if r["emulated"]:
            assert r["started"] and r["devices"] >= 1 and "capabilities" in r
        else:
            assert not r["started"] and r["error"] and r["error_kind"]
