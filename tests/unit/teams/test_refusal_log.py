"""The refused-request log is bounded: a flood writes one line per kind per window, and a
refusal after a quiet window is written in full again. Time is a ``ManualClock``."""

from __future__ import annotations

import logging

import pytest

from bot.teams.refusals import RefusalLog
from tests.support.clock import ManualClock


class Lines:
    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self.caplog = caplog

    def __call__(self) -> list[str]:
        return self.caplog.messages


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Lines:
    """``lines()``: what has been logged so far."""
    caplog.set_level(logging.WARNING, logger="test.refusals")
    return Lines(caplog)


def new_log(clock: ManualClock) -> RefusalLog:
    return RefusalLog(clock, every=60, logger=logging.getLogger("test.refusals"))


def test_a_flood_writes_the_first_refusal_then_one_count_per_window(lines: Lines):
    clock = ManualClock()
    refusals = new_log(clock)
    for n in range(1000):
        refusals.refused("unauthenticated", "rejected a request", f"bad token {n}")
        clock.advance(seconds=0.3)  # 300 s of flood
    clock.advance(seconds=60)
    refusals.flush()
    first, *counts = lines()
    assert first == "teams: rejected a request: 'bad token 0'"
    assert 4 <= len(counts) <= 6, counts  # one a minute, whatever the flood's size
    assert all(line.startswith("teams: refused ") for line in counts)
    # Every refusal is accounted for, none twice.
    assert sum(int(line.split()[2]) for line in counts) == 999
    assert "unauthenticated requests in the last 60 s" in counts[0]


def test_kinds_are_counted_apart_and_a_quiet_window_starts_over(lines: Lines):
    clock = ManualClock()
    refusals = new_log(clock)
    refusals.refused("unauthenticated", "rejected a request", "no token")
    refusals.refused("wrong_tenant", "refused another tenant", "tenant x")
    refusals.refused("wrong_tenant", "refused another tenant", "tenant y")
    assert lines() == [
        "teams: rejected a request: 'no token'",
        "teams: refused another tenant: 'tenant x'",
    ]
    clock.advance(seconds=61)
    refusals.flush()
    assert lines()[2:] == [
        "teams: refused 1 more wrong tenant requests in the last 60 s (the latest: 'tenant y')"
    ]
    clock.advance(seconds=61)  # a quiet window: nothing to say, and the count starts over
    refusals.flush()
    assert len(lines()) == 3
    refusals.refused("unauthenticated", "rejected a request", "again")
    assert lines()[3:] == ["teams: rejected a request: 'again'"]


def test_the_detail_is_bounded_and_quoted(lines: Lines):
    refusals = new_log(ManualClock())
    refusals.refused("unauthenticated", "rejected a request", "x" * 5000 + "\nforged line")
    (line,) = lines()
    assert "\n" not in line and len(line) < 300
