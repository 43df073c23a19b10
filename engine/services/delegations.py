"""Delegates when someone is away, as the front ends set, end and read them (Slack's and
Teams' ``away`` words, the console, ``/v1/people/{name}/away``), and as a new request finds
them (``away_among``). The rules are ``engine.domain.delegation``'s."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from engine.domain.approvers import Roster
from engine.domain.delegation import Absence, absence_problem, away_refusal, delegates_for
from engine.domain.errors import Forbidden, NotFound, Unprocessable
from engine.domain.model import Principal
from engine.ports import Clock
from engine.ports.store import AbsenceStore


async def away_among(
    store: AbsenceStore,
    approvers: Sequence[str],
    now: datetime,
    barred: Collection[str | None] = (),
) -> dict[str, Absence]:
    """The absences that route a request for ``approvers`` (people) to delegates other than
    ``barred`` (``delegates_for``); nothing is read when it names no approvers."""
    if not approvers:
        return {}
    return delegates_for(approvers, await store.absences(now, approvers), now, barred)


class Delegations:
    """Setting, ending and reading absences, each behind ``away_refusal``."""

    def __init__(self, store: AbsenceStore, clock: Clock, config: Roster) -> None:
        self.store = store
        self.clock = clock
        self.config = config

    def _may(self, who: Principal, person: str) -> None:
        refusal = away_refusal(who, person)
        if refusal is not None:
            raise Forbidden(refusal)
        if person not in self.config.people:
            raise NotFound(f"{person} is not in people:", person=person)

    async def set_away(
        self, who: Principal, person: str, until: datetime, delegate: str
    ) -> Absence:
        """``person`` away until ``until``, ``delegate`` deciding for them meanwhile (any
        earlier absence of theirs replaced). ``Forbidden``, ``NotFound`` or
        ``Unprocessable`` (``absence_problem``) change nothing."""
        self._may(who, person)
        now = self.clock.now()
        problem = absence_problem(self.config.people, person, delegate, until, now)
        if problem is not None:
            raise Unprocessable(problem)
        absence = Absence(person, delegate, until, set_by=who.name, set_at=now)
        await self.store.set_absence(absence)
        return absence

    async def end_away(self, who: Principal, person: str) -> Absence | None:
        """End ``person``'s absence now: the one ended, None when they were not away."""
        self._may(who, person)
        return await self.store.end_absence(person, who.name, self.clock.now())

    async def away(self, who: Principal, person: str) -> Absence | None:
        """``person``'s absence in force now, None when they are not away."""
        self._may(who, person)
        found = await self.store.absences(self.clock.now(), [person])
        return found[0] if found else None

    async def current(self, who: Principal) -> list[Absence]:
        """Every absence in force now, by person: admins only."""
        if not who.is_admin:
            raise Forbidden("only admins can see everyone's absences")
        return await self.store.absences(self.clock.now())
