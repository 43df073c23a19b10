"""Takeover requests: reading them (with their votes), an operator's request to take over a
run, and the browser's SDP answer. Deciding them is ``engine.adapters.store.decisions``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase, insert_outbox
from engine.adapters.store.fast import Fast
from engine.adapters.store.journal import Guard, append_journal
from engine.adapters.store.rows import FAST_INSERT_TAKEOVER, takeover_from_row, takeover_values
from engine.adapters.store.statuses import status_in
from engine.domain.errors import Conflict, NotFound, TransitionRefused
from engine.domain.model import (
    OPEN_TAKEOVER_STATUSES,
    JournalEvent,
    NewEvent,
    RunStatus,
    TakeoverRequest,
    TakeoverStatus,
    Vote,
)
from engine.domain.records import OutboxFor


class TakeoverStore(StoreBase):
    async def get_takeover(self, request_id: str) -> TakeoverRequest:
        def work(conn: Connection) -> TakeoverRequest:
            return load_takeover(conn, request_id)

        return await self.db.transact(work, write=False)

    async def list_takeovers(
        self,
        *,
        run_id: str | None = None,
        statuses: Sequence[TakeoverStatus] = (),
        limit: int = 200,
    ) -> list[TakeoverRequest]:
        def work(conn: Connection) -> list[TakeoverRequest]:
            q = select(t.takeover_requests).order_by(t.takeover_requests.c.created_at).limit(limit)
            if run_id is not None:
                q = q.where(t.takeover_requests.c.run_id == run_id)
            if statuses:
                q = q.where(status_in(t.takeover_requests.c.status, statuses))
            rows = list((conn.execute(q)).mappings())
            votes = votes_of(conn, [r["id"] for r in rows])
            return [takeover_from_row(r, votes.get(r["id"], ())) for r in rows]

        return await self.db.transact(work, write=False)

    async def request_takeover(
        self,
        request: TakeoverRequest,
        now: datetime,
        event: NewEvent,
        *,
        outbox: OutboxFor | None = None,
    ) -> TakeoverRequest:
        """An operator's request on a queued or running run, journaled as ``event`` (its
        ``takeover_requested``): the run parks before the step."""

        def work(conn: Connection) -> TakeoverRequest:
            open_count = (
                conn.execute(
                    select(func.count())
                    .select_from(t.takeover_requests)
                    .where(
                        t.takeover_requests.c.run_id == request.run_id,
                        status_in(t.takeover_requests.c.status, OPEN_TAKEOVER_STATUSES),
                    )
                )
            ).scalar_one()
            if open_count:
                raise TransitionRefused(
                    "the run already has an open takeover request", current=RunStatus.WAITING.value
                )
            append_journal(
                conn,
                request.run_id,
                [event],
                now,
                guard=Guard.OPEN,
                refused="only a queued or running run can be taken over",
            )
            if request.step_id is not None:
                # After the append: its UPDATE holds the run's row, so a worker's
                # ``step_started`` committed meanwhile is seen here, not missed.
                _refuse_started(conn, request.run_id, request.step_id)
            FAST_INSERT_TAKEOVER(conn, takeover_values(request))
            after = load_takeover(conn, request.id)
            if outbox is not None:
                insert_outbox(conn, self, outbox(after), now)
            return after

        return await self.db.transact(work)


def _refuse_started(conn: Connection, run_id: str, step_id: str) -> None:
    """A takeover of a step the run has already started (or finished) could never park it:
    refused, and the transaction that would create the request rolls back."""
    j = t.journal
    started = conn.execute(
        select(j.c.seq)
        .where(
            j.c.run_id == run_id,
            j.c.step_id == step_id,
            j.c.event == JournalEvent.STEP_STARTED.value,
        )
        .limit(1)
    ).first()
    if started is not None:
        raise Conflict(
            f"step {step_id!r} of run {run_id} has already started; a takeover can only stop "
            "the run before a step it has not reached",
            stepId=step_id,
        )


def votes_of(conn: Connection, request_ids: Sequence[str]) -> dict[str, list[Vote]]:
    if not request_ids:
        return {}
    q = (
        select(t.takeover_votes)
        .where(t.takeover_votes.c.request_id.in_(list(request_ids)))
        .order_by(t.takeover_votes.c.at)
    )
    out: dict[str, list[Vote]] = {}
    for r in (conn.execute(q)).mappings():
        out.setdefault(r["request_id"], []).append(Vote(r["person"], r["at"], r["notes"]))
    return out


def with_votes(conn: Connection, row: Any) -> TakeoverRequest:
    """A request from its row; its votes are read only when it has any."""
    votes = votes_of(conn, [row["id"]]).get(row["id"], []) if row["approvals"] else []
    return takeover_from_row(row, votes)


_LOAD_TAKEOVER = Fast(
    select(t.takeover_requests).where(t.takeover_requests.c.id == bindparam("request_id"))
)


def load_takeover(conn: Connection, request_id: str) -> TakeoverRequest:
    row = _LOAD_TAKEOVER(conn, {"request_id": request_id}).mappings().one_or_none()
    if row is None:
        raise NotFound(f"takeover request {request_id} not found", request_id=request_id)
    return with_votes(conn, row)
