"""People away and their delegates (``engine.domain.delegation``): one row per person, each
change audited (``away.set``, ``away.end``: who, when, old, new) in its own transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.domain.delegation import Absence


def _absence(row: Any) -> Absence:
    return Absence(
        person=row["person"],
        delegate=row["delegate"],
        until=row["until"],
        set_by=row["set_by"],
        set_at=row["set_at"],
    )


def _audit(
    conn: Connection, action: str, actor: str, person: str, now: datetime, **kw: Any
) -> None:
    old, new = kw.get("old"), kw.get("new")
    conn.execute(
        insert(t.audit_log).values(
            at=now,
            actor=actor,
            action=action,
            target=f"away.{person}",
            old=None if old is None else old.as_json(),
            new=None if new is None else new.as_json(),
        )
    )


class AbsenceStore(StoreBase):
    async def set_absence(self, absence: Absence) -> Absence | None:
        """Record ``absence``, replacing the person's earlier one (returned, active or not;
        None when there was none), audited as ``away.set`` by its ``set_by``."""

        def work(conn: Connection) -> Absence | None:
            a = t.absences
            row = conn.execute(select(a).where(a.c.person == absence.person)).mappings().first()
            old = None if row is None else _absence(row)
            conn.execute(delete(a).where(a.c.person == absence.person))
            conn.execute(
                insert(a).values(
                    person=absence.person,
                    delegate=absence.delegate,
                    until=absence.until,
                    set_by=absence.set_by,
                    set_at=absence.set_at,
                )
            )
            _audit(
                conn,
                "away.set",
                absence.set_by,
                absence.person,
                absence.set_at,
                old=old,
                new=absence,
            )
            return old

        return await self.db.transact(work)

    async def end_absence(self, person: str, actor: str, now: datetime) -> Absence | None:
        """End ``person``'s absence now: the one ended, audited as ``away.end`` by ``actor``;
        None (and nothing written) when they have none still active at ``now``."""

        def work(conn: Connection) -> Absence | None:
            a = t.absences
            row = conn.execute(select(a).where(a.c.person == person)).mappings().first()
            if row is None:
                return None
            old = _absence(row)
            conn.execute(delete(a).where(a.c.person == person))
            if not old.active(now):
                return None  # a lapsed row goes without an audit: nothing was ended
            _audit(conn, "away.end", actor, person, now, old=old)
            return old

        return await self.db.transact(work)

    async def absences(self, now: datetime, people: Sequence[str] | None = None) -> list[Absence]:
        """The absences active at ``now`` (of ``people`` only, when given), by person."""
        if people is not None and not people:
            return []
        a = t.absences
        q = select(a).where(a.c.until > now).order_by(a.c.person)
        if people is not None:
            q = q.where(self.one_of(a.c.person, list(people)))

        def work(conn: Connection) -> list[Absence]:
            return [_absence(row) for row in conn.execute(q).mappings()]

        return await self.db.transact(work, write=False)
