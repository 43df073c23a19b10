"""Decisions on a takeover request, as pure functions: given the request as read, who decides,
the verdict and the time, each returns the ``Outcome``: the request's new state, the status it
must still be in for the write to apply, the vote it records, the journal events, the card's
messages and whether the run goes back to work. Nothing here reads or writes; a decision the
request's state does not allow raises the domain's error, with the message the API shows.

    grant      a vote toward the quorum (``engine.domain.quorum``); the last one, or an admin
               override, decides: ``granted`` (``released`` too with ``release``)
    deny       ``denied``: the run goes back to work to follow its deny path or fail
    release    a granted request handed back: the run resumes at the step
    answer     the taker's browser answers the operator's offer (WebRTC SDP) on a granted
               request: stored on it, nothing journaled, the card unchanged
    expire     past its deadline: ``expired``, the run applies its ``timeoutBehavior``
    escalate   still pending at its ``escalateAfterMinutes``: the people of ``escalateTo``
               may decide too, and are told (``engine.domain.reminders.escalation``)
    cancel     an admin cancelled the run: its open requests end with it
    unreached  the run ended on its own: a request still open (for a step it never reached)
               ends with it, noting why

These are what runs: a service binds one with who decides, the verdict and the time (its
authorization first), and the store's ``apply_decision`` calls it on the request it read and
writes the ``Outcome``; a cancellation and a run's end read the run's open requests and
write each one's ``cancel`` or ``unreached`` outcome the same way. Only expiry is also applied
set-based, by the sweeper's batch statements (``engine.adapters.store.expiry``), checked
against ``expire`` by a test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.domain import notify
from engine.domain.approvers import escalated_approvers
from engine.domain.cancellation import CANCELLED_REQUEST, REQUESTS_CANCELLED, UNREACHED_NOTE
from engine.domain.delegation import seat
from engine.domain.errors import AlreadyDecided, DuplicateVote, SeatTaken, TransitionRefused
from engine.domain.expiry import EXPIRED, EXPIRES, EXPIRY_EVENT, expiry_data, status_at
from engine.domain.model import (
    JournalEvent,
    NewEvent,
    OutboxMessage,
    TakeoverRequest,
    TakeoverStatus,
    Vote,
)
from engine.domain.quorum import grant_decides
from engine.domain.reminders import escalation

Override = Mapping[str, Any] | None
"""How a person decides when not as one of the approvers: ``{"override": "admin"}``."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one decision does to one request. The store applies it in one guarded write:
    ``UPDATE ... WHERE id = :id AND status = :read_status [AND approvals = :read_approvals]``
    with ``changes``; zero rows means someone else decided first (``already_decided``)."""

    request: TakeoverRequest  # the request as decided
    read_status: TakeoverStatus  # the guard: still in the status it was read in
    read_approvals: int | None  # the guard of a grant: no vote counted meanwhile
    changes: Mapping[str, Any]  # the columns the write sets
    vote: Vote | None  # the vote to record (a grant)
    events: tuple[NewEvent, ...]
    outbox: tuple[OutboxMessage, ...]
    back_to_work: bool  # the run is re-queued (or claimed) with the events

    @property
    def status(self) -> TakeoverStatus:
        return self.request.status


# -- what the decisions journal -------------------------------------------------------------------


def grant_data(
    request_id: str,
    person: str,
    notes: str | None,
    approvals: int,
    required: int,
    final: bool,
    override: Override = None,
) -> dict[str, Any]:
    """The data of ``takeover_granted``: the vote, the count it leaves, whether it decided."""
    return {
        "requestId": request_id,
        "by": person,
        "notes": notes,
        "approvals": approvals,
        "approvalsRequired": required,
        "final": final,
        **(override or {}),
    }


def release_events(
    request_id: str, step_id: str | None, person: str, as_admin: bool = False
) -> list[NewEvent]:
    """``takeover_released`` and ``run_resumed``: the run goes back to work at the step."""
    released: dict[str, object] = {"requestId": request_id, "by": person}
    if as_admin:  # an admin released a run someone else took over
        released["asAdmin"] = True
    return [
        NewEvent(JournalEvent.TAKEOVER_RELEASED, step_id, released),
        NewEvent(JournalEvent.RUN_RESUMED, step_id, {"requestId": request_id}),
    ]


def denial_event(
    request_id: str, step_id: str | None, person: str, notes: str | None, override: Override
) -> NewEvent:
    """``takeover_denied``: who, why, and an admin override if it was one."""
    return NewEvent(
        JournalEvent.TAKEOVER_DENIED,
        step_id,
        {"requestId": request_id, "by": person, "notes": notes, **(override or {})},
    )


def override_details(details: Mapping[str, Any], person: str, override: Override) -> dict[str, Any]:
    """The request's ``details`` keeping an override (``details.override``), for the cards."""
    return {**details, "override": {"by": person, **(override or {})}}


def already_decided_error(request: TakeoverRequest, now: datetime) -> AlreadyDecided:
    """The error of a decision that came too late: the request's status at ``now`` (expired,
    though the sweeper may not know yet) and who decided it."""
    status = status_at(request, now).value
    who = request.decided_by or request.released_by
    return AlreadyDecided(
        f"request {request.id} is already {status}" + (f" (by {who})" if who else ""),
        current=status,
        decided_by=who,
    )


# -- the decisions --------------------------------------------------------------------------------


def _open(request: TakeoverRequest, now: datetime) -> None:
    """A grant or a denial needs a request still pending at ``now``."""
    if status_at(request, now) != TakeoverStatus.PENDING:
        raise already_decided_error(request, now)


def _outcome(
    request: TakeoverRequest,
    changes: dict[str, Any],
    events: list[NewEvent],
    *,
    back_to_work: bool,
    vote: Vote | None = None,
    read_approvals: int | None = None,
    handed_back: bool = False,
) -> Outcome:
    votes = (*request.votes, vote) if vote is not None else request.votes
    after = dataclasses.replace(
        request,
        votes=votes,
        **{k: v for k, v in changes.items() if k != "approvals"},
    )
    return Outcome(
        request=after,
        read_status=request.status,
        read_approvals=read_approvals,
        changes=changes,
        vote=vote,
        events=tuple(events),
        outbox=tuple(notify.card_handed_back(after) if handed_back else notify.card_changed(after)),
        back_to_work=back_to_work,
    )


def _unjournaled(
    request: TakeoverRequest, changes: dict[str, Any], outbox: Sequence[OutboxMessage] = ()
) -> Outcome:
    """A change to a request that journals nothing and puts nothing back to work (an answer,
    an escalation): guarded by its status as read, with ``outbox``'s messages."""
    return Outcome(
        request=dataclasses.replace(request, **changes),
        read_status=request.status,
        read_approvals=None,
        changes=changes,
        vote=None,
        events=(),
        outbox=tuple(outbox),
        back_to_work=False,
    )


def grant(
    request: TakeoverRequest,
    person: str,
    now: datetime,
    *,
    notes: str | None = None,
    sdp_offer: str | None = None,
    release: bool = False,
    override: Override = None,
) -> Outcome:
    """``person``'s grant. Counted toward the quorum; the one that completes it, or an admin
    override whatever the count, decides the request: ``granted``, or with ``release``
    ``released`` and the run back to work. ``AlreadyDecided`` past its deadline or once
    decided; ``DuplicateVote`` for a second grant by the same person."""
    _open(request, now)
    own = seat(request, person)  # a delegate's vote is the absent approver's
    earlier = next((v.person for v in request.votes if seat(request, v.person) == own), None)
    if earlier is not None:
        error = DuplicateVote if earlier == person else SeatTaken
        raise error(_counted_already(earlier, person, own), request_id=request.id)
    counted = len(request.votes)
    approvals, required = counted + 1, request.approvals_required
    final = grant_decides(approvals, required, bool(override))
    changes: dict[str, Any] = {"approvals": approvals}
    if final:
        changes.update(
            status=TakeoverStatus.RELEASED if release else TakeoverStatus.GRANTED,
            decided_by=person,
            decided_at=now,
            notes=notes,
            sdp_offer=sdp_offer,
        )
        if release:
            changes.update(released_by=person, released_at=now)
    if override:
        changes["details"] = override_details(request.details, person, override)
    data = grant_data(request.id, person, notes, approvals, required, final, override)
    if own != person:
        data["for"] = own
    events = [NewEvent(JournalEvent.TAKEOVER_GRANTED, request.step_id, data)]
    if final and release:
        events += release_events(request.id, request.step_id, person)
    return _outcome(
        request,
        changes,
        events,
        back_to_work=final and release,
        vote=Vote(person, now, notes),
        read_approvals=counted,
    )


def _counted_already(earlier: str, person: str, own: str) -> str:
    """The refusal of a second grant for the seat ``own``: the same person's, or the absent
    approver's and their delegate's (``engine.domain.delegation.seat``)."""
    if earlier == person:
        return f"{person} has already granted this request"
    if earlier == own:
        return f"{own} has already granted this request, and {person} decides for {own}"
    return f"{earlier} has already granted this request for {own}"


def deny(
    request: TakeoverRequest,
    person: str,
    now: datetime,
    *,
    notes: str | None = None,
    override: Override = None,
) -> Outcome:
    """``person`` denies a pending request: ``denied``, and the run goes back to work to
    follow its deny path or fail. ``AlreadyDecided`` past its deadline or once decided."""
    _open(request, now)
    changes: dict[str, Any] = {
        "status": TakeoverStatus.DENIED,
        "decided_by": person,
        "decided_at": now,
        "notes": notes,
    }
    if override:
        changes["details"] = override_details(request.details, person, override)
    event = denial_event(request.id, request.step_id, person, notes, override)
    return _outcome(request, changes, [event], back_to_work=True)


def release(
    request: TakeoverRequest, person: str, now: datetime, *, admin: bool = False
) -> Outcome:
    """``person`` hands a granted request back: ``released``, the run resumes at the step.
    ``admin``: an admin releasing a run someone else took over, journaled as such; the card's
    notice says the request was handed back (``notify.card_handed_back``).
    ``TransitionRefused`` unless the request is granted."""
    if request.status != TakeoverStatus.GRANTED:
        raise TransitionRefused(
            f"request {request.id} is {request.status}, not granted",
            current=request.status.value,
            request_id=request.id,
        )
    changes: dict[str, Any] = {
        "status": TakeoverStatus.RELEASED,
        "released_by": person,
        "released_at": now,
    }
    as_admin = admin and request.decided_by != person
    events = release_events(request.id, request.step_id, person, as_admin)
    return _outcome(request, changes, events, back_to_work=True, handed_back=True)


def answer(request: TakeoverRequest, sdp_answer: str) -> Outcome:
    """The taker's SDP answer on a granted request (the operator's live session); any other
    status is ``TransitionRefused``. Nothing is journaled and the card does not change."""
    if request.status != TakeoverStatus.GRANTED:
        raise TransitionRefused(
            f"request {request.id} is {request.status}; an answer needs a granted request",
            current=request.status.value,
        )
    return _unjournaled(request, {"sdp_answer": sdp_answer})


def escalate(request: TakeoverRequest, now: datetime) -> Outcome | None:
    """A pending request whose escalation is due at ``now``: its ``escalateTo`` join its
    approvers (``escalated_approvers``; a request naming none keeps none: anyone may decide
    it already), the due time is cleared so it escalates once, and the escalation notice goes
    to its channels. None when it is not due, or no longer pending at ``now``."""
    due = request.escalate_at
    if due is None or due > now or status_at(request, now) != TakeoverStatus.PENDING:
        return None
    widened = escalated_approvers(request)
    changes: dict[str, Any] = {"escalate_at": None}
    if widened is not None:
        changes["approvers"] = widened
    return _unjournaled(request, changes, escalation(request, now))


def expire(request: TakeoverRequest, now: datetime) -> Outcome | None:
    """A request past its deadline at ``now`` expires: ``expired``, and the run goes back to
    work to apply its ``timeoutBehavior`` (auto-reject, or auto-approve). None when it has
    not expired: still in time, or decided already."""
    if status_at(request, now) != EXPIRED or request.status not in EXPIRES:
        return None
    changes: dict[str, Any] = {"status": EXPIRED, "decided_at": now}
    data = expiry_data(request.id, request.timeout_behavior.value)
    event = NewEvent(EXPIRY_EVENT, request.step_id, data)
    return _outcome(request, changes, [event], back_to_work=True)


def cancel(request: TakeoverRequest, actor: str, now: datetime) -> Outcome | None:
    """An admin cancelled the run: its request, if still open, is ``cancelled`` with it (the
    run's own end is journaled once, by ``engine.domain.cancellation.cancel_events``). None
    for a request already ended."""
    if request.status not in REQUESTS_CANCELLED:
        return None
    changes: dict[str, Any] = {"status": CANCELLED_REQUEST, "decided_by": actor, "decided_at": now}
    event = NewEvent(JournalEvent.TAKEOVER_CANCELLED, request.step_id, {"requestId": request.id})
    return _outcome(request, changes, [event], back_to_work=False)


def unreached(request: TakeoverRequest, now: datetime) -> Outcome | None:
    """The run ended on its own with this request still open (an operator's, for a step it
    never reached): ``cancelled``, its notes saying why. None for a request already ended."""
    if request.status not in REQUESTS_CANCELLED:
        return None
    changes: dict[str, Any] = {
        "status": CANCELLED_REQUEST,
        "decided_at": now,
        "notes": UNREACHED_NOTE,
    }
    data = {"requestId": request.id, "notes": UNREACHED_NOTE}
    event = NewEvent(JournalEvent.TAKEOVER_CANCELLED, request.step_id, data)
    return _outcome(request, changes, [event], back_to_work=False)
