"""Held calls: the lookups that ``POST /v1/calls`` needs beyond runs and takeover requests."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import case, select
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase
from engine.adapters.store.rows import takeover_from_row
from engine.domain.model import TakeoverKind, TakeoverRequest, TakeoverStatus


class CallStore(StoreBase):
    async def recent_release(self, binding_hash: str, since: datetime) -> TakeoverRequest | None:
        """The newest policy request for this exact call (``binding_hash``) released at or
        after ``since``: an approval an identical call may reuse. None when there is none."""

        async def work(conn: AsyncConnection) -> TakeoverRequest | None:
            tr = t.takeover_requests
            q = (
                select(tr)
                .where(
                    tr.c.binding_hash == binding_hash,
                    tr.c.kind == TakeoverKind.POLICY.value,
                    tr.c.status == TakeoverStatus.RELEASED.value,
                    tr.c.released_at >= since,
                )
                .order_by(tr.c.released_at.desc())
                .limit(1)
            )
            row = (await conn.execute(q)).mappings().one_or_none()
            return takeover_from_row(row) if row is not None else None

        return await self.db.transact(work, write=False)

    async def call_request(self, run_id: str) -> TakeoverRequest | None:
        """The request a held call waits on or was decided by: its policy request, or a later
        confidence-gate diversion of the same step (None: it was never held)."""

        async def work(conn: AsyncConnection) -> TakeoverRequest | None:
            tr = t.takeover_requests
            kinds = [TakeoverKind.POLICY.value, TakeoverKind.GATE.value]
            q = (
                select(tr)
                .where(tr.c.run_id == run_id, tr.c.kind.in_(kinds))
                # A released request has said all it will: the other one (if any) is the news.
                .order_by(
                    case((tr.c.status == TakeoverStatus.RELEASED.value, 1), else_=0),
                    tr.c.created_at.desc(),
                )
                .limit(1)
            )
            row = (await conn.execute(q)).mappings().one_or_none()
            return takeover_from_row(row) if row is not None else None

        return await self.db.transact(work, write=False)
