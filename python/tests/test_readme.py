"""The README's two-process Python example runs as written."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text()
    section = text[text.index("### Two processes") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_as_written(tmp_path):
    script = tmp_path / "two_process.py"
    script.write_text(readme_example())
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "consumer reads b'hello'" in out.stdout, out.stdout
    assert "producer reads b'world'" in out.stdout, out.stdout


def test_the_readme_refit_example_runs_as_written(tmp_path):
    text = README.read_text()
    section = text[text.index("### Weight refit") :]
    script = tmp_path / "refit.py"
    script.write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=180,
        env=os.environ.copy(),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    for step in range(3):
        want = f"step {step} consumers got [(0, {99.0 + step}), (1, {99.0 + step})]"
        assert want in out.stdout, out.stdout
