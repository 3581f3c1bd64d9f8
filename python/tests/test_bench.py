"""The rebuild benchmark (bench/rebuild.py) runs and reports both figures and the ratio."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "rebuild.py"


def test_the_rebuild_benchmark_runs(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIPC_EMU_DIR")}
    env.pop("DEVIPC_RUNTIME_DIR", None)
    out = subprocess.run(
        [sys.executable, str(BENCH), "--n", "50", "--reps", "1"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if "ratio" in l]
    assert len(lines) == 2, out.stdout
    for line in lines:
        assert "one token" in line and "50 tokens" in line
        assert line.count("1 vendor import") == 2, line


REFIT = pathlib.Path(__file__).resolve().parents[1] / "bench" / "refit.py"


def test_the_refit_benchmark_runs(tmp_path):
    """P11's script (bench/refit.py) runs on both backends and prints its ratio."""
    try:
        import torch  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure to import means "no usable torch"
        from conftest import loud_skip

        loud_skip("test_the_refit_benchmark_runs", f"torch does not import here ({e}); pip install torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEVIPC_EMU_DIR")}
    env.pop("DEVIPC_RUNTIME_DIR", None)
    out = subprocess.run(
        [sys.executable, str(REFIT), "--n", "40", "--total-mib", "4", "--bucket-mib", "1", "--steps", "1"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l.startswith("P11 ")]
    assert [l.split()[1] for l in lines] == ["ascend:", "hip:"], out.stdout
    for line in lines:
        assert "40 tokens + rebuild" in line and "ratio" in line, line
