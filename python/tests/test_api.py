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
            "except devipc.errors.InvalidArgumentError as e:\n    print('refused', e.kind)")
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


def test_devipc_errors_defines_exactly_the_tables_classes():
    # The extension made the classes from the table of error kinds (the Rust rows, then
    # the bindings' own); devipc.errors re-exports exactly those, DevipcError first.
    table = devipc._devipc._error_table
    names = ["DevipcError"] + [row["class"] for row in table]
    assert devipc.errors.__all__ == names
    exceptions = {n for n, v in vars(devipc.errors).items()
                  if isinstance(v, type) and issubclass(v, BaseException)}
    assert exceptions == set(names)
    for row in table:
        cls = getattr(devipc.errors, row["class"])
        assert cls.__name__ == row["class"] and cls.__module__ == "devipc.errors"
        assert cls.__bases__ == (getattr(devipc.errors, row["parent"]),)
        assert cls.__doc__ == row["doc"]
    assert devipc.errors.DevipcError.__module__ == "devipc.errors"
    # Codes: the Rust kinds have unique ones from 1 up; the bindings' own kinds have none
    # and come last.
    codes = [row["code"] for row in table if row["code"] is not None]
    assert codes == sorted(set(codes)) and codes[0] == 1
    assert [row["kind"] for row in table if row["code"] is None] == ["closed", "buffer_in_use", "peer_lost"]
    assert table[-3:] == [row for row in table if row["code"] is None]
    # The stub declares the same classes, in the same order.
    stub = (pathlib.Path(devipc.__file__).parent / "errors.pyi").read_text()
    assert re.findall(r"^class (\w+)", stub, re.M) == names
    assert re.findall(r'^    "(\w+)",$', stub, re.M) == names


def test_the_root_keeps_devipc_error_and_no_other_exception():
    assert devipc.DevipcError is devipc.errors.DevipcError
    for name in devipc.__all__:
        value = getattr(devipc, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            assert name == "DevipcError", name
    for name in devipc.errors.__all__[1:]:
        assert not hasattr(devipc, name), name
    assert not hasattr(devipc.Runtime, "framework_malloc")
    assert not hasattr(devipc.Runtime, "framework_free")


def test_an_error_is_raised_as_its_kinds_class(kind):
    classes = {row["kind"]: row["class"] for row in devipc._devipc._error_table}
    rt = devipc.Runtime.emulated(kind)
    raised = []
    for call in (
        lambda: devipc.token_info("garbage"),
        lambda: rt.allocate(64, device=99),
        lambda: rt.create_signal().wait(timeout=0),
        lambda: rt.allocate(64).write(object()),
    ):
        try:
            call()
        except devipc.DevipcError as e:
            raised.append(e)
    rt.close()
    try:
        rt.device_count()
    except devipc.DevipcError as e:
        raised.append(e)
    assert [e.kind for e in raised] == [
        "invalid_token", "invalid_device", "timeout", "invalid_argument", "closed"
    ]
    for e in raised:
        assert type(e).__name__ == classes[e.kind]
        assert type(e) is getattr(devipc.errors, classes[e.kind])
