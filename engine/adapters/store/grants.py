"""Grants: one conditional UPDATE counts a person's vote and, when it completes the quorum
(``engine.domain.quorum``), decides the request in the same statement.

A request that needs several grants stays pending until the last one; an admin override
decides it at once. A grant that releases hands the run back to work (``ResumeStore``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import String, Text, bindparam, case, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import insert_outbox
from engine.adapters.store.decisions import already_decided, mark_override
from engine.adapters.store.fast import Fast
from engine.adapters.store.journal import Guard, append_journal
from engine.adapters.store.resume import ResumeStore, unclaimed
from engine.adapters.store.rows import takeover_from_row
from engine.adapters.store.statuses import may_become
from engine.adapters.store.tables import UTCDateTime
from engine.adapters.store.takeovers import votes_of
from engine.domain.decisions import grant_data, release_events
from engine.domain.errors import DuplicateVote
from engine.domain.expiry import still_open
from engine.domain.model import JournalEvent, NewEvent, TakeoverRequest, TakeoverStatus, Vote
from engine.domain.quorum import forced_by_override, grant_decides, quorum_met
from engine.domain.records import Adopt, Check, LinkUse, OutboxFor

_GRANTS: dict[bool, Fast] = {}


def _grant_statement(release: bool) -> Fast:
    """One UPDATE counts the vote and, when it completes the quorum, decides (and with
    ``release`` also releases). Built once: see ``journal._append_statement``."""
    stmt = _GRANTS.get(release)
    if stmt is None:
        tr = t.takeover_requests
        final = quorum_met(tr.c.approvals + 1, tr.c.approvals_required)
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
                may_become(tr.c.status, TakeoverStatus.GRANTED),
                still_open(tr.c.expires_at, now),
            )
            .values(values)
            .returning(tr)
        )
    return stmt


class GrantStore(ResumeStore):
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
        link: LinkUse | None = None,
    ) -> TakeoverRequest:
        """Record ``person``'s grant. When the quorum is reached the request becomes granted
        (and released too, with ``release``), and the run is re-queued (or claimed by
        ``adopt``). ``link``: the signed link it comes through, its use recorded with it."""
        return await self._decide(
            adopt,
            self._grant_unit(
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
            link,
        )

    def _grant_unit(
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
        """The unit of work of ``grant``."""

        def work(conn: Connection) -> TakeoverRequest:
            unclaimed(adopt)
            params = {
                "request_id": request_id,
                "now": now,
                "person": person,
                "notes": notes,
                "sdp_offer": sdp_offer,
            }
            row = _grant_statement(release)(conn, params).mappings().one_or_none()
            if row is None:
                raise already_decided(conn, request_id, now, check)
            override = check(takeover_from_row(row)) if check is not None else None
            if forced_by_override(row["approvals"], row["approvals_required"], bool(override)):
                row = _force_grant(conn, row, person, now, notes, sdp_offer, release)
            if override:
                row = mark_override(conn, row, person, override)
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
            decided = grant_decides(approvals, required, bool(override))
            data = grant_data(request_id, person, notes, approvals, required, decided, override)
            events = [NewEvent(JournalEvent.TAKEOVER_GRANTED, step_id, data)]
            if decided and release:
                events += release_events(request_id, step_id, person)
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
