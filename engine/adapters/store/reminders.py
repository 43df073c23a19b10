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
from engine.adapters.store.base import StoreBase, insert_outbox, takeover_from_row
from engine.domain.model import TakeoverRequest, TakeoverStatus
from engine.domain.records import OutboxFor


class ReminderStore(StoreBase):
    async def queue_reminders(
        self,
        now: datetime,
        *,
        remind: OutboxFor,
        escalate: OutboxFor,
        limit: int = 500,
    ) -> tuple[list[TakeoverRequest], list[TakeoverRequest]]:
        """Queue the due reminders and escalations of requests still pending (and not yet
        expired); returns (reminded, escalated). An escalation adds ``escalate_to`` to a request
        that names its approvers, so the people it asks can decide."""

        def work(conn: Connection) -> tuple[list[TakeoverRequest], list[TakeoverRequest]]:
            tr = t.takeover_requests
            reminded = _claim(conn, self.db.is_sqlite, tr.c.remind_at, now, limit)
            escalated = _claim(conn, self.db.is_sqlite, tr.c.escalate_at, now, limit)
            for request in escalated:
                if request.approvers:
                    widened = list(dict.fromkeys([*request.approvers, *request.escalate_to]))
                    conn.execute(update(tr).where(tr.c.id == request.id).values(approvers=widened))
            messages = [m for r in reminded for m in remind(r)]
            messages += [m for r in escalated for m in escalate(r)]
            insert_outbox(conn, self, messages, now)
            return reminded, escalated

        return await self.db.transact(work)


def _claim(
    conn: Connection,
    is_sqlite: bool,
    due: ColumnElement[datetime | None],
    now: datetime,
    limit: int,
) -> list[TakeoverRequest]:
    """Clear ``due`` on up to ``limit`` pending requests whose time has come; return them."""
    tr = t.takeover_requests
    condition = (
        due.is_not(None),
        due <= now,
        tr.c.status == TakeoverStatus.PENDING.value,
        tr.c.expires_at > now,  # about to expire anyway: the expiry notice says it all
    )
    pick = select(tr.c.id).where(*condition).order_by(due).limit(limit)
    if not is_sqlite:
        pick = pick.with_for_update(skip_locked=True)
    ids = list(conn.execute(pick).scalars())
    if not ids:
        return []
    rows = conn.execute(
        update(tr).where(tr.c.id.in_(ids), *condition).values({due.key: None}).returning(tr)
    ).mappings()
    return [takeover_from_row(row) for row in rows]
