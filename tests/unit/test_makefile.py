"""The Makefile says what it does while it installs: pip runs ``--quiet`` for minutes; ``make
run`` installs only what serving needs, the other targets the dev tools too; CI lints (ruff,
mypy strict, the import contracts) before it runs the suite. Only ``make --dry-run`` runs here:
nothing is installed."""

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
    pip = next(i for i, line in enumerate(plan) if "pip install --quiet -e" in line)
    serve = next(i for i, line in enumerate(plan) if "signoff serve" in line)
    assert said < pip and venv_made < pip < serve
    assert any("creating" in line for line in plan[:venv_made])


def dry_run(target: str, venv: Path) -> list[str]:
    """What ``make TARGET`` would run with its venv at ``venv`` (dry run: nothing runs)."""
    return subprocess.run(
        ["make", "--dry-run", target, f"VENV={venv}", f"PEERS_VENV={venv}-peers"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.splitlines()


def pip_installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line and "--upgrade pip" not in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_run_installs_only_what_serving_needs(tmp_path: Path) -> None:
    installs = pip_installs(dry_run("run", tmp_path / "venv"))
    assert installs == [f"{tmp_path / 'venv'}/bin/python -m pip install --quiet -e ."]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
@pytest.mark.parametrize("target", ["test", "lint", "bench", "reliability"])
def test_the_other_targets_install_the_dev_tools(tmp_path: Path, target: str) -> None:
    venv = tmp_path / "venv"
    lines = dry_run(target, venv)
    ours = [line for line in pip_installs(lines) if str(venv / "bin") in line]
    assert ours == [f"{venv}/bin/python -m pip install --quiet -e '.[dev]'"]
    said = next(i for i, line in enumerate(lines) if "with its dev tools into" in line)
    assert "first time" in lines[said]
    assert said < lines.index(ours[0])


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_stamps_reuse_the_venv_and_a_dev_install_serves_run_too(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".installed").touch()  # after `make run`: newer than pyproject.toml
    assert pip_installs(dry_run("run", venv)) == []
    assert pip_installs(dry_run("test", venv)) == [
        f"{venv}/bin/python -m pip install --quiet -e '.[dev]'"
    ]
    (venv / ".installed-dev").touch()  # after `make test`
    assert pip_installs(dry_run("test", venv)) == []
    assert not any("-m venv" in line for line in dry_run("test", venv))
    # `make test` in a new venv touches both stamps: a `make run` after it installs nothing.
    dev = next(line for line in dry_run("test", tmp_path / "new") if line.startswith("touch"))
    assert dev == f"touch {tmp_path / 'new'}/.installed-dev {tmp_path / 'new'}/.installed"


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
