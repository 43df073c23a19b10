"""bot.console.outcome: what an ended run's approvals came to (the console's badge)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.console.outcome import open_requests, run_outcome
from cards.samples import sample_request, sample_run
from engine.domain.model import RunStatus, TakeoverRequest, TakeoverStatus, TimeoutBehavior


def _request(status: TakeoverStatus, **changes: Any) -> TakeoverRequest:
    return replace(sample_request("pending"), status=status, **changes)


def test_the_last_decided_request_is_the_outcome_of_an_ended_run() -> None:
    ended = replace(sample_run(), status=RunStatus.COMPLETED)
    released, denied = _request(TakeoverStatus.RELEASED), _request(TakeoverStatus.DENIED)
    cancelled = _request(TakeoverStatus.CANCELLED)
    expired = _request(TakeoverStatus.EXPIRED)
    lenient = _request(TakeoverStatus.EXPIRED, timeout_behavior=TimeoutBehavior.AUTO_APPROVE)

    def name(*requests: TakeoverRequest) -> str | None:
        outcome = run_outcome(ended, requests)
        return None if outcome is None else f"{outcome.name}/{outcome.tone}"

    assert name(released) == "approved/ok"
    assert name(released, denied) == "denied/bad"  # a second approval step was denied
    assert name(denied, cancelled) == "denied/bad"  # a cancelled request decided nothing
    assert name(expired) == "expired/bad" and name(lenient) == "auto-approved/ok"
    assert name() is None and name(cancelled) is None


def test_a_run_under_way_has_no_outcome_yet() -> None:
    waiting = replace(sample_run(), status=RunStatus.WAITING)
    requests = [_request(TakeoverStatus.RELEASED), _request(TakeoverStatus.PENDING)]
    assert run_outcome(waiting, requests) is None
    assert [r.status for r in open_requests(requests)] == [TakeoverStatus.PENDING]
