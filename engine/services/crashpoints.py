"""Crash points: places where the reliability suite SIGKILLs a ``signoff serve`` process.

Inert in production: unless ``SIGNOFF_TEST_CRASH_DIR`` names a directory when the process
starts, ``reached`` returns at once and ``hooked`` hands back the function it was given.

With it set, the test arms a point by creating an empty file named after the point in that
directory. The first process to reach an armed point removes the file (only one can) and
SIGKILLs itself there, so exactly one replica dies, exactly at that point:

    sweep   inside the sweeper's expiry transaction: requests marked expired, runs re-queued,
            the journal written, nothing committed
    swept   the sweeper's expiry committed, its runs not yet woken
    ack     a POST handled (a grant, a Slack or Teams click committed), its answer not yet sent
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import ParamSpec, TypeVar

DIR_VAR = "SIGNOFF_TEST_CRASH_DIR"
POINTS = ("sweep", "swept", "ack")
ENABLED = bool(os.environ.get(DIR_VAR))

_P = ParamSpec("_P")
_R = TypeVar("_R")


def reached(point: str) -> None:
    """SIGKILL this process if ``point`` is armed (and disarm it)."""
    if not ENABLED:
        return
    try:
        os.unlink(os.path.join(os.environ[DIR_VAR], point))
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def hooked(point: str, fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn``, reaching ``point`` first on every call (``fn`` itself when not ENABLED)."""
    if not ENABLED:
        return fn

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        reached(point)
        return fn(*args, **kwargs)

    return call
