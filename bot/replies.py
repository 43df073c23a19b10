"""The one table of what a decision is, for every front end: which ``Approvals`` call each verb
makes, and which kind of refusal each engine error is.

    verb      call                                   Slack       Teams  web page  signed link
    grant     grant(..., release=True)  (approve)    Approve     ✓      ✓         ✓
    takeover  grant(..., release=False)              Take over   ✓      ✓         ✓
    release   release(...)                           Release     ✓      ✓         ✓
    deny      deny(..., notes=reason)                the modal   ✓      ✓         ✓

A signed link decides through ``engine.services.links.ApprovalLinks.decide`` (its use is
recorded in the decision's transaction), with the same verbs (``VERBS``).

Refusals, most specific first (``AlreadyDecided`` is a ``TransitionRefused`` is a ``Conflict``):

    AlreadyDecided     DECIDED         someone decided first, or the request expired
    TransitionRefused  NOT_TAKEN_OVER  a release of a request nobody took over
    SeatTaken          REFUSED         a delegate's vote, or the absent approver's, counted
    DuplicateVote      VOTED           this person's approval is already counted
    NotFound           MISSING         no such request
    StoreError         UNAVAILABLE     the database could not record it: try again
    Forbidden, InvalidRequest, Conflict, Gone
                       REFUSED         the engine's message says why

Each front end words a refusal in its own medium (Slack @mentions, a Teams card banner, a web
page), from the kind and the sentences here.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Protocol

from engine.domain.errors import (
    AlreadyDecided,
    Conflict,
    DuplicateVote,
    Forbidden,
    Gone,
    InvalidRequest,
    NotFound,
    SeatTaken,
    SignoffError,
    StoreError,
    TransitionRefused,
)
from engine.domain.model import Principal, TakeoverRequest
from engine.services.links import VERBS

__all__ = ["VERBS", "Refusal", "decide", "refusal", "sentence"]

NOTHING_CHANGED = "nothing changed"
UNAVAILABLE = "Signoff could not record that just now, so nothing changed. Please try again."
NO_REQUEST = "This approval request no longer exists."


class Decisions(Protocol):
    """The ``engine.services.approvals.Approvals`` calls a decision makes."""

    async def grant(
        self, request_id: str, who: Principal, *, notes: str | None = ..., release: bool = ...
    ) -> TakeoverRequest: ...
    async def deny(
        self, request_id: str, who: Principal, *, notes: str | None = ...
    ) -> TakeoverRequest: ...
    async def release(self, request_id: str, who: Principal) -> TakeoverRequest: ...


async def decide(
    approvals: Decisions, request_id: str, who: Principal, verb: str, notes: str | None = None
) -> TakeoverRequest:
    """``verb`` on the request by ``who``: the request as the decision left it. ``InvalidRequest``
    for a verb not in ``VERBS``; a release takes no notes."""
    if verb in ("grant", "takeover"):
        return await approvals.grant(request_id, who, notes=notes, release=verb == "grant")
    if verb == "deny":
        return await approvals.deny(request_id, who, notes=notes)
    if verb == "release":
        return await approvals.release(request_id, who)
    raise InvalidRequest(f"unknown action {verb!r}")


class Refusal(Enum):
    """Why a decision changed nothing (the table above)."""

    DECIDED = "decided"
    NOT_TAKEN_OVER = "not taken over"
    VOTED = "voted"
    MISSING = "missing"
    UNAVAILABLE = "unavailable"
    REFUSED = "refused"


_REFUSALS: tuple[tuple[type[SignoffError], Refusal], ...] = (
    (AlreadyDecided, Refusal.DECIDED),
    (TransitionRefused, Refusal.NOT_TAKEN_OVER),
    (SeatTaken, Refusal.REFUSED),  # the delegate's vote and the absent approver's are one
    (DuplicateVote, Refusal.VOTED),
    (NotFound, Refusal.MISSING),
    (StoreError, Refusal.UNAVAILABLE),
    (Forbidden, Refusal.REFUSED),
    (InvalidRequest, Refusal.REFUSED),
    (Conflict, Refusal.REFUSED),
    (Gone, Refusal.REFUSED),
)


def refusal(exc: SignoffError) -> Refusal | None:
    """The kind of refusal ``exc`` is; None for an error that is no refusal (re-raise it)."""
    return next((kind for error, kind in _REFUSALS if isinstance(exc, error)), None)


def sentence(message: str, fit: Callable[[str], str] = str) -> str:
    """An engine message as a sentence ("you are not ..." -> "You are not ...; nothing
    changed."); ``fit`` shortens and escapes it for the medium first."""
    text = fit(message[:1].upper() + message[1:])
    return text if text.endswith((".", "!", "?")) else f"{text}; {NOTHING_CHANGED}."
