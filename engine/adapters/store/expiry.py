"""Ending requests without a decision: expiry (the sweeper) and cancellation (an admin)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    String,
    any_,
    bindparam,
    exists,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import (
    FAST_INSERT_JOURNAL,
    REQUEUE,
    Guard,
    StoreBase,
    append_journal,
    insert_outbox,
    takeover_from_row,
)
from engine.adapters.store.db import mark_ready
from engine.adapters.store.fast import Fast
from engine.adapters.store.tables import UTCDateTime
from engine.adapters.store.takeovers import _LIVE_RUN, _OPEN
from engine.domain.errors import TransitionRefused
from engine.domain.model import JournalEvent, NewEvent, RunStatus, TakeoverRequest, TakeoverStatus
from engine.domain.records import OutboxFor


class ExpiryStore(StoreBase):
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
            if not self.db.is_sqlite:
                rows = list(
                    conn.execute(
                        _EXPIRE_ALL,
                        {"ids": list(by_run.values()), "run_ids": list(by_run), "now": now},
                    ).mappings()
                )
                if rows:
                    mark_ready(conn)
                return _expired(conn, rows)
            rows = list(_SQLITE_EXPIRE(conn, {"ids": list(by_run.values()), "now": now}).mappings())
            if not rows:
                return []
            seqs: dict[str, int] = dict(
                _SQLITE_REQUEUE(conn, {"ids": [r["run_id"] for r in rows], "now": now}).rows
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
                FAST_INSERT_JOURNAL(conn, journal_rows)
                mark_ready(conn)
            return _expired(conn, rows)

        def _expired(conn: Connection, rows: list[Any]) -> list[TakeoverRequest]:
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


def _expire_all_statement() -> Any:
    """PostgreSQL: a sweep batch's three writes in one statement, set-based in the database
    (no journal rows built and bound one by one here): the picked requests expire, their live
    runs go back to the queue with a sequence number each, and each such run's journal gets its
    ``takeover_expired`` event. Returns the expired requests' rows."""
    tr = t.takeover_requests
    now = bindparam("now", type_=UTCDateTime())
    expired = (
        update(tr)
        .where(
            tr.c.id == any_(bindparam("ids", type_=postgresql.ARRAY(String()))),
            tr.c.status == TakeoverStatus.PENDING.value,
        )
        .values(status=TakeoverStatus.EXPIRED.value, decided_at=now)
        .returning(*tr.c)
        .cte("expired")
    )
    requeued = (
        update(t.runs)
        .where(
            # By key, not joined: joined, PostgreSQL hashes the whole runs table for each batch.
            # The keys as a set (unnest), not ``= ANY(array)``: PostgreSQL probes the primary
            # key once per key (EXPLAIN: a nested loop over pk_runs, 14 ms for 2,000 keys),
            # where with ANY it filtered every row of the table against the array (a sequential
            # scan of 100,000 runs, 30 ms).
            t.runs.c.id.in_(
                select(func.unnest(bindparam("run_ids", type_=postgresql.ARRAY(String()))))
            ),
            t.runs.c.status.in_(_LIVE_RUN),
            exists().where(expired.c.run_id == t.runs.c.id),
        )
        .values(next_seq=t.runs.c.next_seq + 1, updated_at=now, status=REQUEUE)
        .returning(t.runs.c.id, t.runs.c.next_seq)
        .cte("requeued")
    )
    journaled = insert(t.journal).from_select(
        ["run_id", "seq", "step_id", "event", "data", "at"],
        select(
            requeued.c.id,
            requeued.c.next_seq - 1,
            expired.c.step_id,
            literal(JournalEvent.TAKEOVER_EXPIRED.value),
            func.json_build_object(
                "requestId", expired.c.id, "behavior", expired.c.timeout_behavior
            ),
            now,
        ).join_from(expired, requeued, requeued.c.id == expired.c.run_id),
    )
    return select(expired).add_cte(journaled.cte("journaled"))


_EXPIRE_ALL = _expire_all_statement()


def _json_keys() -> Any:
    """SQLite: the keys bound as one JSON array (``json_each``), so the statement is constant
    (``engine.adapters.store.fast``: compiled once, run on the driver) whatever the batch's size."""
    return select(literal_column("value")).select_from(
        func.json_each(bindparam("ids", type_=JSON()))
    )


_SQLITE_EXPIRE = Fast(
    update(t.takeover_requests)
    .where(
        t.takeover_requests.c.id.in_(_json_keys()),
        t.takeover_requests.c.status == TakeoverStatus.PENDING.value,
    )
    .values(
        status=TakeoverStatus.EXPIRED.value,
        decided_at=bindparam("now", type_=UTCDateTime()),
    )
    .returning(t.takeover_requests)
)
_SQLITE_REQUEUE = Fast(
    update(t.runs)
    # The live statuses spelled out: a list bound to IN is expanded per execution, which the
    # constant statement cannot be.
    .where(t.runs.c.id.in_(_json_keys()), or_(*(t.runs.c.status == status for status in _LIVE_RUN)))
    .values(
        next_seq=t.runs.c.next_seq + 1,
        updated_at=bindparam("now", type_=UTCDateTime()),
        status=REQUEUE,
    )
    .returning(t.runs.c.id, t.runs.c.next_seq)
)


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
        guard=Guard.LIVE,
        values={
            "status": RunStatus.CANCELLED.value,
            "lease_owner": None,
            "lease_expires_at": None,
            "error": f"cancelled by {actor}",
        },
        refused="the run has already ended",
    )
    return [takeover_from_row(r) for r in rows]
