"""The Makefile says what it does while it installs: pip runs ``--quiet`` for minutes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_first_make_run_says_it_is_installing_before_pip_runs(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    plan = subprocess.run(
        ["make", "--dry-run", "run", f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()
    said = next(
        i
        for i, line in enumerate(plan)
        if "installing Signoff and its dependencies into" in line and "first time" in line
    )
    venv_made = next(i for i, line in enumerate(plan) if "-m venv" in line)
    pip = next(i for i, line in enumerate(plan) if "pip install" in line)
    serve = next(i for i, line in enumerate(plan) if "signoff serve" in line)
    assert said < pip and venv_made < pip < serve
    assert any("creating" in line for line in plan[:venv_made])
