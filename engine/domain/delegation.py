"""Delegates when someone is away: who decides for whom, and the rules of naming one.

A person away names a delegate until a time (an ``Absence``: ``/signoff away until
2026-12-24 delegate @bob``, the console, ``PUT /v1/people/{name}/away``). Until then:

- **Routing.** A request made while an approver is away goes to their delegate as well
  (``delegates_for``): its approvers are widened with the delegate, who it decides for is kept
  on the request (``details.delegates``, ``delegated``) and journaled
  (``takeover_delegated``: "bob decides for alice, who is away until ..."), and the cards say
  so. A request made during the absence keeps its widened approvers once it ends; a request
  made after it goes to the person again.
- **One hop.** Only an approver's own absence routes: a request that reaches bob through
  alice's delegation does not go on to carol because bob is away too. A delegate who is an
  approver of the request already, or who started its run, is not added (a delegate never
  approves their own run, whatever ``allowSelfApproval`` says).
- **Quorum.** The delegate's grant counts as the absent person's (``seat``): with 2 of
  {alice, carol} needed and alice away, bob's approval is alice's, and alice's own (should she
  click after all) does not count a second time.
- **Who sets it.** A person sets and ends their own; an admin anyone's (``away_refusal``).
  The delegate is a known person other than the absent one, and the absence ends in the
  future, at most ``MAX_AWAY`` ahead (``absence_problem``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from engine.domain.errors import Unprocessable
from engine.domain.model import JournalEvent, NewEvent, Principal, Role, TakeoverRequest

MAX_AWAY = timedelta(days=365)
"""The furthest ahead an absence may end: a delegation nobody remembers is not left standing."""

MAX_UNTIL_TEXT = 40  # "2026-12-24T09:00:00.000000+01:00" and some
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

DELEGATES = "delegates"
"""The ``details`` key of a request listing who decides for whom:
``[{"for": "alice", "delegate": "bob", "until": "<ISO time>"}]``."""


@dataclass(frozen=True, slots=True)
class Absence:
    """``person`` is away until ``until``; ``delegate`` decides for them meanwhile."""

    person: str
    delegate: str
    until: datetime
    set_by: str
    set_at: datetime

    def active(self, now: datetime) -> bool:
        """Whether the absence still holds at ``now`` (it ends at ``until``)."""
        return now < self.until

    def as_json(self) -> dict[str, Any]:
        return {
            "person": self.person,
            "delegate": self.delegate,
            "until": self.until.isoformat(),
            "setBy": self.set_by,
            "setAt": self.set_at.isoformat(),
        }


def parse_until(text: str) -> datetime:
    """When an absence ends, as written: a date (``2026-12-24``: back that day, from 00:00
    UTC) or an ISO 8601 time (``2026-12-24T09:00+01:00``; without an offset, UTC).
    ``Unprocessable`` for anything else."""
    text = text.strip()
    try:
        if len(text) > MAX_UNTIL_TEXT:
            raise ValueError
        if _DATE.fullmatch(text):
            return datetime.combine(date.fromisoformat(text), time(), UTC)
        when = datetime.fromisoformat(text.replace("z", "Z"))
        return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    except (ValueError, OverflowError):
        shown = text[:MAX_UNTIL_TEXT]
        raise Unprocessable(
            f"{shown!r} is no date: give one like 2026-12-24, or a time like 2026-12-24T09:00+01:00"
        ) from None


def absence_problem(
    people: Collection[str], person: str, delegate: str, until: datetime, now: datetime
) -> str | None:
    """Why ``person`` may not be away until ``until`` with ``delegate`` deciding for them, in
    the words of whoever asked; None when they may."""
    if person not in people:
        return f"{person} is not in people:"
    if delegate not in people:
        return f"the delegate {delegate} is not in people:"
    if delegate == person:
        return "the delegate must be someone else than the person who is away"
    if until <= now:
        return f"the absence must end in the future, and {until.isoformat()} has passed"
    if until > now + MAX_AWAY:
        return f"an absence may last at most {MAX_AWAY.days} days"
    return None


def away_refusal(who: Principal, person: str) -> str | None:
    """Why ``who`` may not set, end or read ``person``'s absence, or None: people their own,
    admins anyone's, agents nobody's."""
    if who.role == Role.AGENT:
        return "agents cannot set or end anyone's absence"
    if who.is_admin or (who.person is not None and who.person == person):
        return None
    return f"only {person} or an admin can set or end {person}'s absence"


def delegates_for(
    approvers: Sequence[str],
    absences: Iterable[Absence],
    now: datetime,
    barred: Collection[str | None] = (),
) -> dict[str, Absence]:
    """The absences that route a new request with ``approvers`` (people) to a delegate, by the
    absent approver: each active absence of an approver whose delegate is not an approver
    already nor ``barred`` (who started the run; for a held call, the person its agent acts
    for), one hop (a delegate's own absence is not followed). A request naming no approvers
    (anyone may decide) has nobody to stand in for."""
    asked = set(approvers)
    found: dict[str, Absence] = {}
    for absence in absences:
        if (
            absence.person in asked
            and absence.active(now)
            and absence.delegate not in asked
            and absence.delegate not in barred
        ):
            found.setdefault(absence.person, absence)
    return {p: found[p] for p in approvers if p in found}


def widened(approvers: Sequence[str], chosen: Mapping[str, Absence]) -> tuple[str, ...]:
    """``approvers`` and then ``chosen``'s delegates (``delegates_for``), each once."""
    return tuple(dict.fromkeys([*approvers, *(a.delegate for a in chosen.values())]))


def stand_in_map(chosen: Mapping[str, Absence]) -> dict[str, str]:
    """Person away -> their delegate, of ``chosen`` (``delegates_for``)."""
    return {person: absence.delegate for person, absence in chosen.items()}


def delegated(request: TakeoverRequest, chosen: Mapping[str, Absence]) -> TakeoverRequest:
    """``request`` with ``chosen``'s delegates (``delegates_for``) among its approvers, each
    once, and who they decide for kept in its ``details``."""
    if not chosen:
        return request
    entries = [
        {"for": a.person, "delegate": a.delegate, "until": a.until.isoformat()}
        for a in chosen.values()
    ]
    details = {**request.details, DELEGATES: entries}
    approvers = widened(request.approvers, chosen)
    return dataclasses.replace(request, approvers=approvers, details=details)


def delegation_events(request: TakeoverRequest) -> list[NewEvent]:
    """``takeover_delegated`` of a request ``delegated`` widened, journaled at its step (none
    when nobody decides for anyone)."""
    entries = delegations(request)
    if not entries:
        return []
    data = {"requestId": request.id, DELEGATES: entries}
    return [NewEvent(JournalEvent.TAKEOVER_DELEGATED, request.step_id, data)]


def delegations(request: TakeoverRequest) -> list[dict[str, str]]:
    """The request's ``details.delegates`` as written (a malformed entry is left out)."""
    raw = request.details.get(DELEGATES)
    if not isinstance(raw, list):
        return []
    keys = ("for", "delegate", "until")
    return [
        {k: e[k] for k in keys}
        for e in raw
        if isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys)
    ]


def seat(request: TakeoverRequest, person: str) -> str:
    """Whose vote ``person``'s is toward ``request``'s quorum: the absent approver they were
    asked to decide for, else their own."""
    return stand_ins(request).get(person, person)


def stand_ins(request: TakeoverRequest) -> dict[str, str]:
    """Delegate -> the absent person they decide for, on ``request``."""
    found: dict[str, str] = {}
    for entry in delegations(request):
        found.setdefault(entry["delegate"], entry["for"])
    return found
