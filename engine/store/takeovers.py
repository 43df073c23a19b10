"""Takeover requests: every decision is one conditional UPDATE, so a request is decided once.

Zero rows updated means someone else won (or the request expired): the loser gets
``AlreadyDecided`` with the status and the winner. Decisions that hand the run back put it in
the queue in the same transaction, with their journal events and chat messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, insert, select, update
from sqlalchemy.engine import Connection

from engine.errors import AlreadyDecided, DuplicateVote, NotFound, TransitionRefused
from engine.model import (
    TERMINAL_RUN_STATUSES,
    JournalEvent,
    NewEvent,
    OutboxMessage,
    RunStatus,
    TakeoverRequest,
    TakeoverStatus,
    Vote,
)
from engine.store import tables as t
from engine.store.base import (
    StoreBase,
    append_journal,
    insert_outbox,
    takeover_from_row,
    takeover_values,
)
from engine.store.db import mark_ready

OutboxFor = Callable[[TakeoverRequest], Sequence[OutboxMessage]]

_OPEN = (TakeoverStatus.PENDING.value, TakeoverStatus.GRANTED.value)
_LIVE_RUN = [s.value for s in RunStatus if s not in TERMINAL_RUN_STATUSES]
# A decision re-queues a parked run; a run not parked yet (manual request) keeps its status.
_REQUEUE = case(
    (t.runs.c.status == RunStatus.WAITING.value, RunStatus.QUEUED.value),
    else_=t.runs.c.status,
)


class TakeoverStore(StoreBase):
    async def get_takeover(self, request_id: str) -> TakeoverRequest:
        def work(conn: Connection) -> TakeoverRequest:
            return _load(conn, request_id)

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
                q = q.where(t.takeover_requests.c.status.in_([s.value for s in statuses]))
            rows = list((conn.execute(q)).mappings())
            votes = _votes(conn, [r["id"] for r in rows])
            return [takeover_from_row(r, votes.get(r["id"], ())) for r in rows]

        return await self.db.transact(work, write=False)

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
    ) -> TakeoverRequest:
        """Record ``person``'s grant. When the quorum is reached the request becomes granted
        (and released too, with ``release``), and the run is re-queued."""

        def work(conn: Connection) -> TakeoverRequest:
            tr = t.takeover_requests
            counted = (
                conn.execute(
                    update(tr)
                    .where(
                        tr.c.id == request_id,
                        tr.c.status == TakeoverStatus.PENDING.value,
                        tr.c.expires_at > now,
                    )
                    .values(approvals=tr.c.approvals + 1)
                    .returning(tr.c.approvals, tr.c.approvals_required, tr.c.run_id, tr.c.step_id)
                )
            ).one_or_none()
            if counted is None:
                raise _already_decided(conn, request_id, now)
            approvals, required, run_id, step_id = counted
            voted = conn.execute(
                self.insert_ignore(t.takeover_votes)
                .values(request_id=request_id, person=person, notes=notes, at=now)
                .on_conflict_do_nothing(index_elements=["request_id", "person"])
            )
            if not voted.rowcount:
                raise DuplicateVote(
                    f"{person} has already granted this request", request_id=request_id
                )
            grant_data: dict[str, Any] = {
                "requestId": request_id,
                "by": person,
                "notes": notes,
                "approvals": approvals,
                "approvalsRequired": required,
            }
            if approvals < required:
                grant_data["final"] = False
                append_journal(
                    conn,
                    run_id,
                    [NewEvent(JournalEvent.TAKEOVER_GRANTED, step_id, grant_data)],
                    now,
                )
            else:
                grant_data["final"] = True
                values: dict[str, Any] = {
                    "status": TakeoverStatus.GRANTED.value,
                    "decided_by": person,
                    "decided_at": now,
                    "notes": notes,
                    "sdp_offer": sdp_offer,
                }
                events = [NewEvent(JournalEvent.TAKEOVER_GRANTED, step_id, grant_data)]
                run_values: dict[str, Any] = {}
                if release:
                    values.update(
                        status=TakeoverStatus.RELEASED.value, released_by=person, released_at=now
                    )
                    events += _release_events(request_id, step_id, person)
                    run_values = {"status": _REQUEUE}
                conn.execute(
                    update(tr)
                    .where(tr.c.id == request_id, tr.c.status == TakeoverStatus.PENDING.value)
                    .values(**values)
                )
                append_journal(
                    conn,
                    run_id,
                    events,
                    now,
                    where=[t.runs.c.status.in_(_LIVE_RUN)],
                    values=run_values,
                )
                if release:
                    mark_ready(conn)
            after = _load(conn, request_id)
            if outbox is not None:
                insert_outbox(conn, self, outbox(after), now)
            return after

        return await self.db.transact(work)

    async def deny(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        notes: str | None = None,
        outbox: OutboxFor | None = None,
    ) -> TakeoverRequest:
        """Deny a pending request; the run is re-queued to follow its deny path or fail."""

        def work(conn: Connection) -> TakeoverRequest:
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
                    .returning(tr.c.run_id, tr.c.step_id)
                )
            ).one_or_none()
            if row is None:
                raise _already_decided(conn, request_id, now)
            run_id, step_id = row
            event = NewEvent(
                JournalEvent.TAKEOVER_DENIED,
                step_id,
                {"requestId": request_id, "by": person, "notes": notes},
            )
            append_journal(
                conn,
                run_id,
                [event],
                now,
                where=[t.runs.c.status.in_(_LIVE_RUN)],
                values={"status": _REQUEUE},
            )
            mark_ready(conn)
            after = _load(conn, request_id)
            if outbox is not None:
                insert_outbox(conn, self, outbox(after), now)
            return after

        return await self.db.transact(work)

    async def release(
        self,
        request_id: str,
        person: str,
        now: datetime,
        *,
        outbox: OutboxFor | None = None,
    ) -> TakeoverRequest:
        """Hand a granted request back: the run is re-queued and resumes at the approval."""

        def work(conn: Connection) -> TakeoverRequest:
            tr = t.takeover_requests
            row = (
                conn.execute(
                    update(tr)
                    .where(tr.c.id == request_id, tr.c.status == TakeoverStatus.GRANTED.value)
                    .values(
                        status=TakeoverStatus.RELEASED.value, released_by=person, released_at=now
                    )
                    .returning(tr.c.run_id, tr.c.step_id)
                )
            ).one_or_none()
            if row is None:
                current = _load(conn, request_id)
                raise TransitionRefused(
                    f"request {request_id} is {current.status}, not granted",
                    current=current.status.value,
                    request_id=request_id,
                )
            run_id, step_id = row
            append_journal(
                conn,
                run_id,
                _release_events(request_id, step_id, person),
                now,
                where=[t.runs.c.status.in_(_LIVE_RUN)],
                values={"status": _REQUEUE},
            )
            mark_ready(conn)
            after = _load(conn, request_id)
            if outbox is not None:
                insert_outbox(conn, self, outbox(after), now)
            return after

        return await self.db.transact(work)

    async def record_sdp_answer(self, request_id: str, answer: str) -> TakeoverRequest:
        def work(conn: Connection) -> TakeoverRequest:
            tr = t.takeover_requests
            res = conn.execute(
                update(tr)
                .where(tr.c.id == request_id, tr.c.status == TakeoverStatus.GRANTED.value)
                .values(sdp_answer=answer)
            )
            if not res.rowcount:
                current = _load(conn, request_id)
                raise TransitionRefused(
                    f"request {request_id} is {current.status}; an answer needs a granted request",
                    current=current.status.value,
                )
            return _load(conn, request_id)

        return await self.db.transact(work)

    async def request_takeover(
        self, request: TakeoverRequest, now: datetime, *, outbox: OutboxFor | None = None
    ) -> TakeoverRequest:
        """An operator's request on a queued or running run: the run parks before the step."""

        def work(conn: Connection) -> TakeoverRequest:
            open_count = (
                conn.execute(
                    select(func.count())
                    .select_from(t.takeover_requests)
                    .where(
                        t.takeover_requests.c.run_id == request.run_id,
                        t.takeover_requests.c.status.in_(_OPEN),
                    )
                )
            ).scalar_one()
            if open_count:
                raise TransitionRefused(
                    "the run already has an open takeover request", current="waiting"
                )
            append_journal(
                conn,
                request.run_id,
                [
                    NewEvent(
                        JournalEvent.TAKEOVER_REQUESTED,
                        request.step_id,
                        {
                            "requestId": request.id,
                            "kind": request.kind.value,
                            "reason": request.reason,
                        },
                    )
                ],
                now,
                where=[t.runs.c.status.in_([RunStatus.QUEUED.value, RunStatus.RUNNING.value])],
                refused="only a queued or running run can be taken over",
            )
            conn.execute(insert(t.takeover_requests).values(takeover_values(request)))
            after = _load(conn, request.id)
            if outbox is not None:
                insert_outbox(conn, self, outbox(after), now)
            return after

        return await self.db.transact(work)

    async def expire_due(
        self, now: datetime, *, limit: int = 500, outbox: OutboxFor | None = None
    ) -> list[TakeoverRequest]:
        """Expire up to ``limit`` pending requests past ``expiresAt`` (each exactly once, safe
        with several sweepers) and re-queue their runs to apply ``timeoutBehavior``."""

        def work(conn: Connection) -> list[TakeoverRequest]:
            tr = t.takeover_requests
            pick = (
                select(tr.c.id, tr.c.run_id)
                .where(tr.c.status == TakeoverStatus.PENDING.value, tr.c.expires_at <= now)
                .order_by(tr.c.expires_at)
                .limit(limit)
            )
            if not self.db.is_sqlite:
                pick = pick.with_for_update(skip_locked=True)
            picked = (conn.execute(pick)).all()
            by_run: dict[str, str] = {}
            for request_id, run_id in picked:
                by_run.setdefault(run_id, request_id)  # one per run per batch: seq numbers
            if not by_run:
                return []
            rows = list(
                (
                    conn.execute(
                        update(tr)
                        .where(
                            tr.c.id.in_(list(by_run.values())),
                            tr.c.status == TakeoverStatus.PENDING.value,
                        )
                        .values(status=TakeoverStatus.EXPIRED.value, decided_at=now)
                        .returning(tr)
                    )
                ).mappings()
            )
            if not rows:
                return []
            seqs: dict[str, int] = dict(
                (
                    conn.execute(
                        update(t.runs)
                        .where(
                            t.runs.c.id.in_([r["run_id"] for r in rows]),
                            t.runs.c.status.in_(_LIVE_RUN),
                        )
                        .values(next_seq=t.runs.c.next_seq + 1, updated_at=now, status=_REQUEUE)
                        .returning(t.runs.c.id, t.runs.c.next_seq)
                    )
                ).all()
            )
            journal_rows = [
                {
                    "run_id": r["run_id"],
                    "seq": seqs[r["run_id"]] - 1,
                    "step_id": r["step_id"],
                    "event": JournalEvent.TAKEOVER_EXPIRED.value,
                    "data": {"requestId": r["id"], "behavior": r["timeout_behavior"]},
                    "at": now,
                }
                for r in rows
                if r["run_id"] in seqs
            ]
            if journal_rows:
                conn.execute(insert(t.journal), journal_rows)
                mark_ready(conn)
            expired = [takeover_from_row(r) for r in rows]
            if outbox is not None:
                insert_outbox(conn, self, [m for req in expired for m in outbox(req)], now)
            return expired

        return await self.db.transact(work)

    async def cancel_run(
        self, run_id: str, actor: str, now: datetime, *, outbox: OutboxFor | None = None
    ) -> list[TakeoverRequest]:
        """Cancel a run, its open takeover requests and its unfinished child runs."""

        def work(conn: Connection) -> list[TakeoverRequest]:
            cancelled: list[TakeoverRequest] = []
            pending = [run_id]
            first = True
            while pending:
                current = pending.pop()
                try:
                    cancelled += _cancel_one(conn, current, actor, now)
                except TransitionRefused:
                    if first:
                        raise
                first = False
                children = conn.execute(
                    select(t.runs.c.id).where(
                        t.runs.c.parent_run_id == current, t.runs.c.status.in_(_LIVE_RUN)
                    )
                )
                pending.extend(children.scalars())
            if outbox is not None:
                insert_outbox(conn, self, [m for req in cancelled for m in outbox(req)], now)
            return cancelled

        return await self.db.transact(work)


def _cancel_one(conn: Connection, run_id: str, actor: str, now: datetime) -> list[TakeoverRequest]:
    tr = t.takeover_requests
    rows = list(
        (
            conn.execute(
                update(tr)
                .where(tr.c.run_id == run_id, tr.c.status.in_(_OPEN))
                .values(status=TakeoverStatus.CANCELLED.value, decided_by=actor, decided_at=now)
                .returning(tr)
            )
        ).mappings()
    )
    events = [
        NewEvent(JournalEvent.TAKEOVER_CANCELLED, r["step_id"], {"requestId": r["id"]})
        for r in rows
    ]
    events.append(NewEvent(JournalEvent.RUN_CANCELLED, data={"by": actor}))
    append_journal(
        conn,
        run_id,
        events,
        now,
        where=[t.runs.c.status.in_(_LIVE_RUN)],
        values={
            "status": RunStatus.CANCELLED.value,
            "lease_owner": None,
            "lease_expires_at": None,
            "error": f"cancelled by {actor}",
        },
        refused="the run has already ended",
    )
    return [takeover_from_row(r) for r in rows]


def _release_events(request_id: str, step_id: str | None, person: str) -> list[NewEvent]:
    return [
        NewEvent(JournalEvent.TAKEOVER_RELEASED, step_id, {"requestId": request_id, "by": person}),
        NewEvent(JournalEvent.RUN_RESUMED, step_id, {"requestId": request_id}),
    ]


def _votes(conn: Connection, request_ids: Sequence[str]) -> dict[str, list[Vote]]:
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


def _load(conn: Connection, request_id: str) -> TakeoverRequest:
    row = (
        (conn.execute(select(t.takeover_requests).where(t.takeover_requests.c.id == request_id)))
        .mappings()
        .one_or_none()
    )
    if row is None:
        raise NotFound(f"takeover request {request_id} not found", request_id=request_id)
    votes = _votes(conn, [request_id])
    return takeover_from_row(row, votes.get(request_id, ()))


def _already_decided(conn: Connection, request_id: str, now: datetime) -> AlreadyDecided:
    current = _load(conn, request_id)
    status = current.status.value
    if current.status == TakeoverStatus.PENDING and current.expires_at <= now:
        status = TakeoverStatus.EXPIRED.value  # the sweeper has not caught up yet
    who = current.decided_by or current.released_by
    return AlreadyDecided(
        f"request {request_id} is already {status}" + (f" (by {who})" if who else ""),
        current=status,
        decided_by=who,
    )
