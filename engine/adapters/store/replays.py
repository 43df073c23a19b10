"""Signed requests already acted on: one row per key, inserted if absent, swept when expired.

The unique key makes "first" a fact of the database, not of a process: two replicas that get
the same request at the same moment both try the insert, and exactly one of them inserts.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.base import StoreBase


class ReplayStore(StoreBase):
    async def remember_request(self, key: str, now: datetime, until: datetime) -> bool:
        """Record ``key`` as seen until ``until``; True when it is new, False when it was
        already recorded and has not expired (a row past its expiry is taken over: it is only
        waiting for the sweep)."""

        def work(conn: Connection) -> bool:
            sr = t.seen_requests
            stmt = (
                self.insert_ignore(sr)
                .values(key=key, seen_at=now, expires_at=until)
                .on_conflict_do_update(
                    index_elements=["key"],
                    set_={"seen_at": now, "expires_at": until},
                    where=sr.c.expires_at <= now,
                )
            )
            return bool(conn.execute(stmt).rowcount)

        return await self.db.transact(work)

    async def forget_requests(self, now: datetime, *, limit: int = 5000) -> int:
        """Delete up to ``limit`` keys expired at ``now``; returns how many. On PostgreSQL the
        rows another replica is deleting are skipped, not waited for."""

        def work(conn: Connection) -> int:
            sr = t.seen_requests
            pick = select(sr.c.key).where(sr.c.expires_at <= now).limit(limit)
            if not self.db.is_sqlite:
                pick = pick.with_for_update(skip_locked=True)
            return int(conn.execute(delete(sr).where(sr.c.key.in_(pick))).rowcount)

        return await self.db.transact(work)
