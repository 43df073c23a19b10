"""Cancelling a run: what it ends with it, and what that writes.

An admin's cancellation ends the run (``cancelled``, its lease dropped, ``error`` saying by
whom), cancels its open takeover requests, and cancels every child run that has not ended,
and their children in turn: a parent waiting on a child would otherwise leave it running for
nobody. A run that ends on its own with an operator's request still open (for a step it never
reached) cancels that request, noting why (``UNREACHED_NOTE``).
"""

from __future__ import annotations

from engine.domain.model import (
    RUN_ALLOWED,
    TAKEOVER_ALLOWED,
    JournalEvent,
    NewEvent,
    RunStatus,
    TakeoverStatus,
    sources_of,
)

CANCELLED_RUN = RunStatus.CANCELLED
CANCELLED_REQUEST = TakeoverStatus.CANCELLED
CHILDREN_CANCELLED = sources_of(CANCELLED_RUN, RUN_ALLOWED)
"""The statuses of the child runs cancelled with their parent: every one not ended yet."""
REQUESTS_CANCELLED = sources_of(CANCELLED_REQUEST, TAKEOVER_ALLOWED)
"""The statuses of the requests cancelled with their run: every one still open."""

UNREACHED_NOTE = "the run ended before it reached this step"


def cancelled_error(actor: str) -> str:
    """The ``error`` of a run ``actor`` cancelled."""
    return f"cancelled by {actor}"


def run_cancelled(actor: str) -> NewEvent:
    """What cancelling a run journals after its requests' own events
    (``engine.domain.decisions.cancel``): the run's end, and by whom."""
    return NewEvent(JournalEvent.RUN_CANCELLED, data={"by": actor})
