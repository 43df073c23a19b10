"""Deciding takeover requests: every decision is one conditional UPDATE, so a request is
decided once.

Zero rows updated means someone else won (or the request expired): the loser gets
``AlreadyDecided`` with the status and the winner. Decisions that hand the run back put it in
the queue (or claim it for a worker here) in the same transaction, with their journal events
and chat messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import String, Text, bindparam, case, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import (
    REQUEUE,
    Guard,
    StoreBase,
    append_journal,
    entries,
    insert_outbox,
    read_journal,
    run_from_row,
    takeover_from_row,
)
from engine.adapters.store.db import mark_ready
from engine.adapters.store.fast import Fast
from engine.adapters.store.tables import UTCDateTime
from engine.adapters.store.takeovers import load_takeover, votes_of, with_votes
from engine.domain.errors import AlreadyDecided, DuplicateVote, TransitionRefused
from engine.domain.model import (
    JournalEvent,
    NewEvent,
    Run,
    RunStatus,
    TakeoverRequest,
    TakeoverStatus,
    Vote,
)
from engine.domain.records import Adopt, Check, OutboxFor

_GRANTS: dict[bool, Fast] = {}
_RUN_LOCKED: dict[bool, Fast] = {}


def _grant_statement(release: bool) -> Fast:
    """One UPDATE counts the vote and, when it completes the quorum, decides (and with
    ``release`` also releases). Built once: see ``base._append_statement``."""
    stmt = _GRANTS.get(release)
    if stmt is None:
        tr = t.takeover_requests
        final = tr.c.approvals + 1 >= tr.c.approvals_required
        now = bindparam("now", type_=UTCDateTime())
        person = bindparam("person", type_=String())
        decided = TakeoverStatus.RELEASED if release else TakeoverStatus.GRANTED
        values: dict[str, Any] = {
            "approvals": tr.c.approvals + 1,
            "status": case((final, decided.value), else_=tr.c.status),
            "decided_by": case((final, person), else_=tr.c.decided_by),
            "decided_at": case((final, now), else_=tr.c.decided_at),
            "notes": case((final, bindparam("notes", type_=Text())), else_=tr.c.notes),
            "sdp_offer": case((final, bindparam("sdp_offer", type_=Text())), else_=tr.c.sdp_offer),
        }
        if release:
            values["released_by"] = case((final, person), else_=tr.c.released_by)
            values["released_at"] = case((final, now), else_=tr.c.released_at)
        stmt = _GRANTS[release] = Fast(
            update(tr)
            .where(
                tr.c.id == bindparam("request_id"),
                tr.c.status == TakeoverStatus.PENDING.value,
                tr.c.expires_at > now,
            )
            .values(values)
            .returning(tr)
        )
    return stmt


class DecisionStore(StoreBase):
    async def grant(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        notes: str | None = None,
        sdp_offer: str | None = None,
        release: bool = False,
        outbox: OutboxFor | None = None,
        adopt: Adopt | None = None,
        check: Check | None = None,
    ) -> TakeoverRequest:
        """Record ``person``'s grant. When the quorum is reached the request becomes granted
        (and released too, with ``release``), and the run is re-queued (or claimed by
        ``adopt``)."""
        return await self._decide(
            adopt,
            self.grant_unit(
                request_id,
                person,
                now,
                notes=notes,
                sdp_offer=sdp_offer,
                release=release,
                outbox=outbox,
                adopt=adopt,
                check=check,
            ),
        )

    def grant_unit(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        notes: str | None = None,
        sdp_offer: str | None = None,
        release: bool = False,
        outbox: OutboxFor | None = None,
        adopt: Adopt | None = None,
        check: Check | None = None,
    ) -> Callable[[Connection], TakeoverRequest]:
        """The unit of work of ``grant``, to compose with others in one transaction."""

        def work(conn: Connection) -> TakeoverRequest:
            _unclaimed(adopt)
            params = {
                "request_id": request_id,
                "now": now,
                "person": person,
                "notes": notes,
                "sdp_offer": sdp_offer,
            }
            row = _grant_statement(release)(conn, params).mappings().one_or_none()
            if row is None:
                raise _already_decided(conn, request_id, now, check)
            override = check(takeover_from_row(row)) if check is not None else None
            if override and row["approvals"] < row["approvals_required"]:
                row = _force_grant(conn, row, person, now, notes, sdp_offer, release)
            if override:
                row = _mark_override(conn, row, person, override)
            voted = self.fast_insert_ignore_on(t.takeover_votes, "request_id", "person")(
                conn,
                {"request_id": request_id, "person": person, "notes": notes, "at": now},
            )
            if not voted.rowcount:  # raising rolls the counted vote back with it
                raise DuplicateVote(
                    f"{person} has already granted this request", request_id=request_id
                )
            approvals, required = row["approvals"], row["approvals_required"]
            run_id, step_id = row["run_id"], row["step_id"]
            grant_data: dict[str, Any] = {
                "requestId": request_id,
                "by": person,
                "notes": notes,
                "approvals": approvals,
                "approvalsRequired": required,
                "final": approvals >= required or bool(override),
                **(override or {}),
            }
            events = [NewEvent(JournalEvent.TAKEOVER_GRANTED, step_id, grant_data)]
            if (approvals >= required or override) and release:
                events += _release_events(request_id, step_id, person)
                self._back_to_work(conn, run_id, events, now, adopt)
            else:
                append_journal(conn, run_id, events, now, guard=Guard.LIVE)
            votes = (
                [Vote(person, now, notes)]
                if approvals == 1
                else votes_of(conn, [request_id]).get(request_id, [])
            )
            after = takeover_from_row(row, votes)
            if outbox is not None:
                insert_outbox(conn, self, outbox(after), now)
            return after

        return work

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
    ) -> TakeoverRequest:
        """Deny a pending request; the run is re-queued (or claimed by ``adopt``) to follow
        its deny path or fail."""
        return await self._decide(
            adopt,
            self.deny_unit(
                request_id, person, now, notes=notes, outbox=outbox, adopt=adopt, check=check
            ),
        )

    def deny_unit(
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
        """The unit of work of ``deny``, to compose with others in one transaction."""

        def work(conn: Connection) -> TakeoverRequest:
            _unclaimed(adopt)
            tr = t.takeover_requests
            row = (
                conn.execute(
                    update(tr)
                    .where(
                        tr.c.id == request_id,
                        tr.c.status == TakeoverStatus.PENDING.value,
                        tr.c.expires_at > now,
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
                raise _already_decided(conn, request_id, now, check)
            override = check(takeover_from_row(row)) if check is not None else None
            if override:
                row = _mark_override(conn, row, person, override)
            event = NewEvent(
                JournalEvent.TAKEOVER_DENIED,
                row["step_id"],
                {"requestId": request_id, "by": person, "notes": notes, **(override or {})},
            )
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
    ) -> TakeoverRequest:
        """Hand a granted request back: the run is re-queued (or claimed by ``adopt``) and
        resumes at the approval. ``admin``: ``person`` is an admin, recorded in the journal
        when they release a run someone else took over."""
        unit = self.release_unit(
            request_id, person, now, admin=admin, outbox=outbox, adopt=adopt, check=check
        )
        return await self._decide(adopt, unit)

    def release_unit(
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
        """The unit of work of ``release``, to compose with others in one transaction."""

        def work(conn: Connection) -> TakeoverRequest:
            _unclaimed(adopt)
            tr = t.takeover_requests
            row = (
                conn.execute(
                    update(tr)
                    .where(tr.c.id == request_id, tr.c.status == TakeoverStatus.GRANTED.value)
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
            events = _release_events(request_id, row["step_id"], person, as_admin)
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

    async def _decide(
        self, adopt: Adopt | None, unit: Callable[[Connection], TakeoverRequest]
    ) -> TakeoverRequest:
        """Run a decision's unit. When it fails, a claim one of its attempts made reaches no
        worker: that attempt's commit may not have happened (the last attempt can fail before
        its unit even runs again), and a worker trusting its run and journal would call the
        next step with nothing committed."""
        try:
            return await self.db.transact(unit)
        except BaseException:
            _unclaimed(adopt)
            raise

    def _back_to_work(
        self,
        conn: Connection,
        run_id: str,
        events: Sequence[NewEvent],
        now: datetime,
        adopt: Adopt | None,
    ) -> None:
        """Append a decision's events and put its run back to work: a parked run is claimed
        for ``adopt``'s worker when one is offered, else queued for any replica. A run that
        has not parked yet (a manual takeover decided ahead of time) keeps its status."""
        if adopt is not None:
            adopt.run_id, adopt.written = None, None
            parked = self._parked(conn, run_id)
            if parked is not None:
                self._claim(conn, parked, events, now, adopt)
                return
        append_journal(conn, run_id, events, now, guard=Guard.LIVE, values={"status": REQUEUE})
        mark_ready(conn)

    def _claim(
        self,
        conn: Connection,
        run: Run,
        events: Sequence[NewEvent],
        now: datetime,
        adopt: Adopt,
    ) -> None:
        """Claim a parked run for ``adopt``'s worker with the decision's events and, after
        them, what its replay would commit first (``Adopt.plan``): one append. The worker
        gets the run and journal as this transaction leaves them."""
        journal = read_journal(conn, run.id)
        claimed = replace(
            run,
            status=RunStatus.RUNNING,
            lease_owner=adopt.owner,
            lease_expires_at=adopt.until,
            updated_at=now,
        )
        if adopt.plan is not None:  # the plan reads the journal with the decision in it
            after = journal[-1].seq + 1 if journal else 1
            decided = journal + entries(run.id, after, events, now)
            events = [*events, *adopt.plan(claimed, decided)]
        values = {
            "status": RunStatus.RUNNING.value,
            "lease_owner": adopt.owner,
            "lease_expires_at": adopt.until,
        }
        first = append_journal(conn, run.id, events, now, guard=Guard.LIVE, values=values)
        adopt.run_id = run.id
        adopt.written = claimed, journal + entries(run.id, first, events, now)

    def _parked(self, conn: Connection, run_id: str) -> Run | None:
        """The run if it waits; on PostgreSQL its row stays locked until the commit."""
        sqlite = self.db.is_sqlite
        stmt = _RUN_LOCKED.get(sqlite)
        if stmt is None:
            query = select(t.runs).where(t.runs.c.id == bindparam("run_id"))
            stmt = _RUN_LOCKED[sqlite] = Fast(query if sqlite else query.with_for_update())
        row = stmt(conn, {"run_id": run_id}).mappings().first()
        if row is None or row["status"] != RunStatus.WAITING.value:
            return None
        return run_from_row(row)


def _force_grant(
    conn: Connection,
    row: Any,
    person: str,
    now: datetime,
    notes: str | None,
    sdp_offer: str | None,
    release: bool,
) -> Any:
    """An admin override decides a request its quorum has not: granted (or released) now.
    The row is already locked by this transaction's UPDATE."""
    tr = t.takeover_requests
    decided = TakeoverStatus.RELEASED if release else TakeoverStatus.GRANTED
    values: dict[str, Any] = {
        "status": decided.value,
        "decided_by": person,
        "decided_at": now,
        "notes": notes,
        "sdp_offer": sdp_offer,
    }
    if release:
        values.update(released_by=person, released_at=now)
    stmt = update(tr).where(tr.c.id == row["id"]).values(values).returning(tr)
    return conn.execute(stmt).mappings().one()


def _mark_override(conn: Connection, row: Any, person: str, override: dict[str, Any]) -> Any:
    """Keep the override on the request (``details.override``), for cards and notices."""
    tr = t.takeover_requests
    details = {**(row["details"] or {}), "override": {"by": person, **override}}
    stmt = update(tr).where(tr.c.id == row["id"]).values(details=details).returning(tr)
    return conn.execute(stmt).mappings().one()


def _unclaimed(adopt: Adopt | None) -> None:
    """At the start of each attempt of a unit: a claim made by an attempt that was rolled
    back (and retried) must not reach the worker."""
    if adopt is not None:
        adopt.run_id, adopt.written = None, None


def _release_events(
    request_id: str, step_id: str | None, person: str, as_admin: bool = False
) -> list[NewEvent]:
    released: dict[str, object] = {"requestId": request_id, "by": person}
    if as_admin:  # an admin released a run someone else took over
        released["asAdmin"] = True
    return [
        NewEvent(JournalEvent.TAKEOVER_RELEASED, step_id, released),
        NewEvent(JournalEvent.RUN_RESUMED, step_id, {"requestId": request_id}),
    ]


def _already_decided(
    conn: Connection, request_id: str, now: datetime, check: Check | None = None
) -> AlreadyDecided:
    """Why a decision's UPDATE matched no row; ``check`` first: a caller who may not
    decide the request is told that, not who decided it."""
    current = load_takeover(conn, request_id)
    if check is not None:
        check(current)
    status = current.status.value
    if current.status == TakeoverStatus.PENDING and current.expires_at <= now:
        status = TakeoverStatus.EXPIRED.value  # the sweeper has not caught up yet
    who = current.decided_by or current.released_by
    return AlreadyDecided(
        f"request {request_id} is already {status}" + (f" (by {who})" if who else ""),
        current=status,
        decided_by=who,
    )
