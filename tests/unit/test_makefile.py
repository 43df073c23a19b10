"""The Makefile says what it does while it installs: pip runs ``--quiet`` for minutes; CI
lints (ruff, mypy strict, the import contracts) before it runs the suite."""

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


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_lint_runs_ruff_mypy_strict_and_the_import_contracts(tmp_path: Path) -> None:
    plan = subprocess.run(
        ["make", "--dry-run", "lint", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    for command in ("ruff check .", "ruff format --check .", "mypy --strict", "lint-imports"):
        assert command in plan, f"make lint does not run {command}"


def test_ci_lints_before_it_runs_the_suite() -> None:
    steps = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip().startswith("make ")
    ]
    assert "make lint" in steps and "make test" in steps
    assert steps.index("make lint") < steps.index("make test")
