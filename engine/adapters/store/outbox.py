"""The outbox: chat messages written with the events that caused them, delivered later.

A dispatcher claims due messages for a short time (so two replicas never send the same one at
once), then marks each sent, to retry at a time, or failed for good (the lifecycle is
``engine.domain.outbox``). What a decision changed (``is_urgent``: card updates and the
notices of decisions) is claimed ahead of everything else.

Marking a message sent or failed is not fenced by its status: the claim is the fence, and a
dispatcher whose claim lapsed under a send still records what happened to it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, case, func, or_, select, update
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase, insert_outbox
from engine.adapters.store.fast import Fast
from engine.adapters.store.statuses import status_in
from engine.adapters.store.tables import UTCDateTime
from engine.domain.model import OutboxMessage, OutboxRecord
from engine.domain.outbox import URGENT_KINDS, URGENT_NOTICES, OutboxStatus, delivery_order

_PENDING = (OutboxStatus.PENDING,)


def _record(row: object) -> OutboxRecord:
    r = row._mapping  # type: ignore[attr-defined]
    return OutboxRecord(
        id=r["id"],
        channel=r["channel"],
        kind=r["kind"],
        dedupe_key=r["dedupe_key"],
        payload=r["payload"],
        run_id=r["run_id"],
        request_id=r["request_id"],
        attempts=r["attempts"],
        created_at=r["created_at"],
    )


def _due(now: Any) -> ColumnElement[bool]:
    """Pending, due, and not claimed by a live claim."""
    ob = t.outbox
    return and_(
        status_in(ob.c.status, _PENDING),
        ob.c.next_attempt_at <= now,
        or_(ob.c.claimed_until.is_(None), ob.c.claimed_until < now),
    )


def _urgent() -> ColumnElement[bool]:
    """``engine.domain.outbox.is_urgent`` as SQL."""
    ob = t.outbox
    return or_(
        ob.c.kind.in_(URGENT_KINDS),
        and_(ob.c.kind == "notice", ob.c.payload["notice"].as_string().in_(URGENT_NOTICES)),
    )


_ANY_DUE = Fast(select(t.outbox.c.id).where(_due(bindparam("now", type_=UTCDateTime()))).limit(1))


class OutboxStore(StoreBase):
    async def queue_outbox(self, messages: Sequence[OutboxMessage], now: datetime) -> None:
        """Queue messages that come with no other change of state (a command's confirmation,
        written once the command has been applied); a dedupe key seen before is skipped."""

        def work(conn: Connection) -> None:
            insert_outbox(conn, self, messages, now)

        await self.db.transact(work)

    async def claim_outbox(
        self, owner: str, now: datetime, *, limit: int = 100, hold: timedelta
    ) -> list[OutboxRecord]:
        """Due messages, oldest first, claimed by ``owner`` until ``now + hold``."""

        ob = t.outbox
        due = _due(now)

        def work(conn: Connection) -> list[OutboxRecord]:
            urgent_first = case((_urgent(), 0), else_=1)
            pick = select(ob.c.id).where(due).order_by(urgent_first, ob.c.id).limit(limit)
            if not self.db.is_sqlite:
                pick = pick.with_for_update(skip_locked=True)
            rows = conn.execute(
                update(ob)
                .where(ob.c.id.in_(pick.scalar_subquery()))
                .values(claimed_by=owner, claimed_until=now + hold)
                .returning(ob)
            )
            return delivery_order(_record(r) for r in rows)

        if await self.nothing_to_claim(_ANY_DUE, {"now": now}):
            return []
        return await self.db.transact(work)

    async def urgent_due(self, channel: str, now: datetime) -> bool:
        """Whether a card update (or a decision's notice) for ``channel`` is due and unclaimed
        (it was queued after the batch being sent was claimed)."""
        ob = t.outbox

        def work(conn: Connection) -> bool:
            q = select(ob.c.id).where(_due(now), ob.c.channel == channel, _urgent()).limit(1)
            return conn.execute(q).first() is not None

        return await self.db.transact(work, write=False)

    async def mark_sent(self, message_id: int, owner: str, now: datetime) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                update(t.outbox)
                .where(t.outbox.c.id == message_id)
                .values(
                    status=OutboxStatus.SENT.value,
                    sent_at=now,
                    attempts=t.outbox.c.attempts + 1,
                    claimed_by=None,
                    claimed_until=None,
                    error=None,
                )
            )

        await self.db.transact(work)

    async def mark_retry(
        self, message_id: int, owner: str, at: datetime, error: str, *, count: bool = True
    ) -> None:
        """Deliver again at ``at`` (``count=False``: it was not attempted, only held back)."""

        def work(conn: Connection) -> None:
            values: dict[str, object] = {
                "next_attempt_at": at,
                "claimed_by": None,
                "claimed_until": None,
                "error": error[:2000],
            }
            if count:
                values["attempts"] = t.outbox.c.attempts + 1
            conn.execute(update(t.outbox).where(t.outbox.c.id == message_id).values(values))

        await self.db.transact(work)

    async def renew_claims(self, message_ids: list[int], owner: str, until: datetime) -> None:
        """Keep ``owner``'s claim on the messages it has not finished with until ``until``."""

        def work(conn: Connection) -> None:
            conn.execute(
                update(t.outbox)
                .where(
                    t.outbox.c.id.in_(message_ids),
                    t.outbox.c.claimed_by == owner,
                    status_in(t.outbox.c.status, _PENDING),
                )
                .values(claimed_until=until)
            )

        if message_ids:
            await self.db.transact(work)

    async def release_claims(self, message_ids: list[int], owner: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                update(t.outbox)
                .where(t.outbox.c.id.in_(message_ids), t.outbox.c.claimed_by == owner)
                .values(claimed_by=None, claimed_until=None)
            )

        if message_ids:
            await self.db.transact(work)

    async def mark_failed(self, message_id: int, error: str) -> None:
        def work(conn: Connection) -> None:
            conn.execute(
                update(t.outbox)
                .where(t.outbox.c.id == message_id)
                .values(
                    status=OutboxStatus.FAILED.value,
                    error=error[:2000],
                    attempts=t.outbox.c.attempts + 1,
                    claimed_by=None,
                    claimed_until=None,
                )
            )

        await self.db.transact(work)

    async def outbox_counts(self) -> dict[OutboxStatus, int]:
        def work(conn: Connection) -> dict[OutboxStatus, int]:
            rows = conn.execute(select(t.outbox.c.status, func.count()).group_by(t.outbox.c.status))
            return {OutboxStatus(status): int(n) for status, n in rows.all()}

        return await self.db.transact(work, write=False)

    async def outbox_messages(
        self,
        *,
        run_id: str | None = None,
        status: OutboxStatus | None = None,
        limit: int = 1000,
    ) -> list[tuple[OutboxRecord, OutboxStatus, str | None]]:
        """Messages with their status and last error (for tests and the console)."""

        def work(conn: Connection) -> list[tuple[OutboxRecord, OutboxStatus, str | None]]:
            q = select(t.outbox).order_by(t.outbox.c.id).limit(limit)
            if run_id is not None:
                q = q.where(t.outbox.c.run_id == run_id)
            if status is not None:
                q = q.where(status_in(t.outbox.c.status, [OutboxStatus(status)]))
            rows = conn.execute(q)
            return [
                (_record(r), OutboxStatus(r._mapping["status"]), r._mapping["error"]) for r in rows
            ]

        return await self.db.transact(work, write=False)
