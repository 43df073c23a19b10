"""Reminders and escalations of pending requests, queued exactly once.

A request carries ``remind_at`` / ``escalate_at`` while its reminder or escalation is still to
come. Queuing one clears the column in the same transaction as the outbox rows it writes, so a
request is never selected twice (the outbox dedupe key stops a repeat anyway). On PostgreSQL
the rows are picked with ``FOR UPDATE SKIP LOCKED``, so several sweepers never pick the same.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase, insert_outbox
from engine.adapters.store.outcomes import decide_on
from engine.adapters.store.rows import takeover_from_row
from engine.adapters.store.statuses import status_in
from engine.domain.decisions import escalate
from engine.domain.expiry import still_open
from engine.domain.model import TakeoverRequest, TakeoverStatus
from engine.domain.records import OutboxFor


class ReminderStore(StoreBase):
    async def queue_reminders(
        self, now: datetime, *, remind: OutboxFor, limit: int = 500
    ) -> tuple[list[TakeoverRequest], list[TakeoverRequest]]:
        """Queue the due reminders and escalations of requests still pending (and not yet
        expired); returns (reminded, escalated). An escalation is a decision
        (``engine.domain.decisions.escalate``: it widens the request's approvers, so the people
        it asks can decide, and says so), written per request as decisions are."""

        def work(conn: Connection) -> tuple[list[TakeoverRequest], list[TakeoverRequest]]:
            tr = t.takeover_requests
            reminded = _claim(conn, self.db.is_sqlite, tr.c.remind_at, now, limit)
            due = _pick(conn, self.db.is_sqlite, tr.c.escalate_at, now, limit)
            escalated = [
                outcome
                for request_id in due
                if (outcome := decide_on(conn, request_id, lambda r: escalate(r, now)))
            ]
            messages = [m for r in reminded for m in remind(r)]
            messages += [m for outcome in escalated for m in outcome.outbox]
            insert_outbox(conn, self, messages, now)
            return reminded, [outcome.request for outcome in escalated]

        return await self.db.transact(work)


def _due(due: ColumnElement[datetime | None], now: datetime) -> tuple[ColumnElement[bool], ...]:
    tr = t.takeover_requests
    return (
        due.is_not(None),
        due <= now,
        status_in(tr.c.status, [TakeoverStatus.PENDING]),
        still_open(tr.c.expires_at, now),  # about to expire anyway: the expiry notice says it all
    )


def _pick(
    conn: Connection,
    is_sqlite: bool,
    due: ColumnElement[datetime | None],
    now: datetime,
    limit: int,
) -> list[str]:
    """Up to ``limit`` pending requests whose ``due`` time has come (locked on PostgreSQL,
    skipping those another sweeper holds)."""
    pick = select(t.takeover_requests.c.id).where(*_due(due, now)).order_by(due).limit(limit)
    if not is_sqlite:
        pick = pick.with_for_update(skip_locked=True)
    return list(conn.execute(pick).scalars())


def _claim(
    conn: Connection,
    is_sqlite: bool,
    due: ColumnElement[datetime | None],
    now: datetime,
    limit: int,
) -> list[TakeoverRequest]:
    """Clear ``due`` on up to ``limit`` pending requests whose time has come; return them."""
    ids = _pick(conn, is_sqlite, due, now, limit)
    if not ids:
        return []
    tr = t.takeover_requests
    rows = conn.execute(
        update(tr).where(tr.c.id.in_(ids), *_due(due, now)).values({due.key: None}).returning(tr)
    ).mappings()
    return [takeover_from_row(row) for row in rows]
