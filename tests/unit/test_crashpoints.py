"""Crash points (``engine/services/crashpoints.py``): inert without ``SIGNOFF_TEST_CRASH_DIR``;
with it, an armed point kills the first process that reaches it, once."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from engine.services import crashpoints

REACH = "from engine.services import crashpoints; crashpoints.reached('sweep'); print('alive')"


def test_without_the_variable_nothing_is_hooked_or_killed() -> None:
    assert not crashpoints.ENABLED  # the test run itself has no crash directory

    def outbox(request: str) -> list[str]:
        return [request]

    assert crashpoints.hooked("sweep", outbox) is outbox
    crashpoints.reached("sweep")  # returns


def test_an_armed_point_kills_the_first_process_that_reaches_it(tmp_path: Path) -> None:
    env = {crashpoints.DIR_VAR: str(tmp_path), "PYTHONPATH": str(Path(__file__).parents[2])}
    (tmp_path / "sweep").touch()
    first = subprocess.run([sys.executable, "-c", REACH], env=env, capture_output=True)
    second = subprocess.run([sys.executable, "-c", REACH], env=env, capture_output=True)
    assert first.returncode == -signal.SIGKILL and first.stdout == b""
    assert not (tmp_path / "sweep").exists()  # disarmed by the kill
    assert second.returncode == 0 and second.stdout == b"alive\n", second.stderr
