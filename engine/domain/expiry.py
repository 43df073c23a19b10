"""When a takeover request expires, and what its expiry writes.

A request expires at its ``expires_at``: from that instant nobody can decide it, though the
sweeper may not have marked it yet (``has_expired``, ``still_open``; a late decision is told
it expired: ``status_at``). The sweeper then moves it ``pending -> expired``, journals one
``takeover_expired`` per request with the ``timeoutBehavior`` to apply (``expiry_data``), and
hands its parked run back to the queue, where the interpreter applies that behaviour.

The rules compare and build with operators only: the SQL store applies these same functions
to its columns, in the single statements of its sweep and its decisions.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from engine.domain.model import (
    TAKEOVER_ALLOWED,
    JournalEvent,
    TakeoverRequest,
    TakeoverStatus,
    sources_of,
)

R = TypeVar("R", covariant=True)
V = TypeVar("V")


class Instant(Protocol[R]):
    """A time, or the store's expression for one."""

    def __le__(self, other: Any, /) -> R: ...
    def __gt__(self, other: Any, /) -> R: ...


EXPIRED = TakeoverStatus.EXPIRED
EXPIRES = sources_of(EXPIRED, TAKEOVER_ALLOWED)  # what can expire: a request still pending
EXPIRY_EVENT = JournalEvent.TAKEOVER_EXPIRED


def deadline(now: datetime, minutes: int | None, default_seconds: int = 0) -> datetime:
    """When a request created at ``now`` expires: ``minutes`` later (the node's, the policy
    rule's or the operator's timeout), else ``default_seconds`` later (``approvals.ttl``)."""
    if minutes is not None:
        return now + timedelta(minutes=minutes)
    return now + timedelta(seconds=default_seconds)


def has_expired(expires_at: Instant[R], now: object) -> R:
    """Whether a request due to expire at ``expires_at`` has at ``now`` (the instant itself
    counts: a decision at ``expires_at`` is too late)."""
    return expires_at <= now


def still_open(expires_at: Instant[R], now: object) -> R:
    """Whether a request due to expire at ``expires_at`` can still be decided at ``now``."""
    return expires_at > now


def status_at(request: TakeoverRequest, now: object) -> TakeoverStatus:
    """The status ``request`` has at ``now``: a request that can expire and is past its time
    has expired, whether or not the sweeper has caught up yet."""
    if request.status in EXPIRES and has_expired(request.expires_at, now):
        return EXPIRED
    return request.status


def expiry_data(request_id: V, behavior: V) -> dict[str, V]:
    """What the ``takeover_expired`` event of a request records: the request, and the
    ``timeoutBehavior`` its run applies on resuming."""
    return {"requestId": request_id, "behavior": behavior}
