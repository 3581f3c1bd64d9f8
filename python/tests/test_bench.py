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

