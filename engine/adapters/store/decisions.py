"""Deciding takeover requests: every decision is one conditional UPDATE, so a request is
decided once.

Zero rows updated means someone else won (or the request expired): the loser gets
``AlreadyDecided`` with the status and the winner. Decisions that hand the run back put it in
the queue (or claim it for a worker here) in the same transaction, with their journal events
and chat messages. Grants, which count toward a quorum first, are
``engine.adapters.store.grants``; putting the run back to work is ``engine.adapters.store.resume``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import insert_outbox
from engine.adapters.store.resume import ResumeStore, unclaimed
from engine.adapters.store.rows import takeover_from_row
from engine.adapters.store.statuses import may_become
from engine.adapters.store.takeovers import load_takeover, with_votes
from engine.domain.decisions import (
    already_decided_error,
    denial_event,
    override_details,
    release_events,
)
from engine.domain.errors import AlreadyDecided, TransitionRefused
from engine.domain.expiry import still_open
from engine.domain.model import NewEvent, TakeoverRequest, TakeoverStatus
from engine.domain.records import Adopt, Check, LinkUse, OutboxFor


class DecisionStore(ResumeStore):
    async def deny(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        notes: str | None = None,
        outbox: OutboxFor | None = None,
        adopt: Adopt | None = None,
        check: Check | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """Deny a pending request; the run is re-queued (or claimed by ``adopt``) to follow
        its deny path or fail. ``link`` as for ``grant``."""
        return await self._decide(
            adopt,
            self._deny_unit(
                request_id, person, now, notes=notes, outbox=outbox, adopt=adopt, check=check
            ),
            link,
        )

    def _deny_unit(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        notes: str | None = None,
        outbox: OutboxFor | None = None,
        adopt: Adopt | None = None,
        check: Check | None = None,
    ) -> Callable[[Connection], TakeoverRequest]:
        """The unit of work of ``deny``."""

        def work(conn: Connection) -> TakeoverRequest:
            unclaimed(adopt)
            tr = t.takeover_requests
            row = (
                conn.execute(
                    update(tr)
                    .where(
                        tr.c.id == request_id,
                        may_become(tr.c.status, TakeoverStatus.DENIED),
                        still_open(tr.c.expires_at, now),
                    )
                    .values(
                        status=TakeoverStatus.DENIED.value,
                        decided_by=person,
                        decided_at=now,
                        notes=notes,
                    )
                    .returning(tr)
                )
                .mappings()
                .one_or_none()
            )
            if row is None:
                raise already_decided(conn, request_id, now, check)
            override = check(takeover_from_row(row)) if check is not None else None
            if override:
                row = mark_override(conn, row, person, override)
            event = denial_event(request_id, row["step_id"], person, notes, override)
            return self._hand_back(conn, row, [event], now, adopt, outbox, None)

        return work

    async def release(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        admin: bool = False,
        outbox: OutboxFor | None = None,
        adopt: Adopt | None = None,
        check: Check | None = None,
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """Hand a granted request back: the run is re-queued (or claimed by ``adopt``) and
        resumes at the approval. ``admin``: ``person`` is an admin, recorded in the journal
        when they release a run someone else took over. ``link`` as for ``grant``."""
        unit = self._release_unit(
            request_id, person, now, admin=admin, outbox=outbox, adopt=adopt, check=check
        )
        return await self._decide(adopt, unit, link)

    def _release_unit(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        admin: bool = False,
        outbox: OutboxFor | None = None,
        adopt: Adopt | None = None,
        check: Check | None = None,
    ) -> Callable[[Connection], TakeoverRequest]:
        """The unit of work of ``release``."""

        def work(conn: Connection) -> TakeoverRequest:
            unclaimed(adopt)
            tr = t.takeover_requests
            row = (
                conn.execute(
                    update(tr)
                    .where(tr.c.id == request_id, may_become(tr.c.status, TakeoverStatus.RELEASED))
                    .values(
                        status=TakeoverStatus.RELEASED.value, released_by=person, released_at=now
                    )
                    .returning(tr)
                )
                .mappings()
                .one_or_none()
            )
            if row is None:
                current = load_takeover(conn, request_id)
                if check is not None:
                    check(current)
                raise TransitionRefused(
                    f"request {request_id} is {current.status}, not granted",
                    current=current.status.value,
                    request_id=request_id,
                )
            as_admin = admin and row["decided_by"] != person
            events = release_events(request_id, row["step_id"], person, as_admin)
            return self._hand_back(conn, row, events, now, adopt, outbox, check)

        return work

    def _hand_back(
        self,
        conn: Connection,
        row: Any,
        events: Sequence[NewEvent],
        now: datetime,
        adopt: Adopt | None,
        outbox: OutboxFor | None,
        check: Check | None,
    ) -> TakeoverRequest:
        """The rest of a denial or a release once its UPDATE matched ``row``: the caller's
        check on it, the events appended and the run put back to work, the card's messages
        queued. Returns the request as decided."""
        if check is not None:
            check(takeover_from_row(row))
        self._back_to_work(conn, row["run_id"], events, now, adopt)
        after = with_votes(conn, row)
        if outbox is not None:
            insert_outbox(conn, self, outbox(after), now)
        return after


def mark_override(conn: Connection, row: Any, person: str, override: dict[str, Any]) -> Any:
    """Keep the override on the request (``details.override``), for cards and notices."""
    tr = t.takeover_requests
    details = override_details(row["details"] or {}, person, override)
    stmt = update(tr).where(tr.c.id == row["id"]).values(details=details).returning(tr)
    return conn.execute(stmt).mappings().one()


def already_decided(
    conn: Connection, request_id: str, now: datetime, check: Check | None = None
) -> AlreadyDecided:
    """Why a decision's UPDATE matched no row; ``check`` first: a caller who may not
    decide the request is told that, not who decided it."""
    current = load_takeover(conn, request_id)
    if check is not None:
        check(current)
    return already_decided_error(current, now)
