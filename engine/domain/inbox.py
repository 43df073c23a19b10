"""A person's inbox: the requests that wait for their own decision.

The console's queue shows it by default (``bot.console.inbox``); the rules of who may decide are
``engine.domain.approvers``'s, read here, never restated.
"""

from __future__ import annotations

from engine.domain.approvers import Roster, decision_refusal, override_of
from engine.domain.delegation import seat
from engine.domain.model import Principal, TakeoverRequest, TakeoverStatus


def waits_for(config: Roster, request: TakeoverRequest, who: Principal) -> bool:
    """Whether ``request`` waits for ``who``'s own decision: pending, not yet approved by them
    (nor, for someone away, by their delegate, or the other way round), and theirs to decide
    as one of its approvers, or as any approver when it names none. An admin's override is not
    counted: an admin may decide nearly every request, and their inbox would be everyone's
    (the queue's "everything waiting" shows those)."""
    if request.status is not TakeoverStatus.PENDING:
        return False
    own = None if who.person is None else seat(request, who.person)  # a delegate: the seat
    if own is not None and any(seat(request, v.person) == own for v in request.votes):
        return False
    if decision_refusal(config, request, who) is not None:
        return False
    return override_of(config, request, who) is None
