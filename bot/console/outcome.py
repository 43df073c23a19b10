"""What a run's approvals came to, for the console's run page and runs list.

A run that followed its ``onDeny`` path ends ``completed`` like an approved one; the badge says
which it was. The outcome is read from the run's takeover requests once the run has ended: the
last one decided (released, denied, expired) is what the run's path followed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.domain.model import (
    TERMINAL_RUN_STATUSES,
    Run,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
)


@dataclass(frozen=True)
class Outcome:
    """``name``: approved | denied | expired | auto-approved; ``tone``: ok | bad (the colour)."""

    name: str
    tone: str


APPROVED = Outcome("approved", "ok")
DENIED = Outcome("denied", "bad")
EXPIRED = Outcome("expired", "bad")
AUTO_APPROVED = Outcome("auto-approved", "ok")


def request_outcome(request: TakeoverRequest) -> Outcome | None:
    """How one request was decided; None while open, or when it was cancelled."""
    if request.status is TakeoverStatus.RELEASED:
        return APPROVED
    if request.status is TakeoverStatus.DENIED:
        return DENIED
    if request.status is TakeoverStatus.EXPIRED:
        auto = request.timeout_behavior is TimeoutBehavior.AUTO_APPROVE
        return AUTO_APPROVED if auto else EXPIRED
    return None


def run_outcome(run: Run, requests: Sequence[TakeoverRequest]) -> Outcome | None:
    """The outcome of an ended run's last decided request (oldest first in ``requests``); None
    for a run still under way or one that never asked anybody."""
    if run.status not in TERMINAL_RUN_STATUSES:
        return None
    for request in reversed(requests):
        outcome = request_outcome(request)
        if outcome is not None:
            return outcome
    return None


def open_requests(requests: Sequence[TakeoverRequest]) -> list[TakeoverRequest]:
    """The requests the run still waits for (the run page's "Waiting for")."""
    return [r for r in requests if r.status in (TakeoverStatus.PENDING, TakeoverStatus.GRANTED)]
