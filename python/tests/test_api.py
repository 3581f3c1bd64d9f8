"""The package's surface: doctor(), lazy torch import, the stubs name what the module has."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import devipc
import devipc._devipc


def test_importing_devipc_torch_does_not_import_torch(tmp_path):
    code = "import sys, devipc.torch; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=tmp_path)


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
