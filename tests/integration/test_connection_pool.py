"""PostgreSQL connections are kept, not opened and closed again under load: each one is a
backend forked, its caches filled and every statement prepared again."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from engine.adapters.store.db import Database

POOL = 6


async def backends_in_use(db: Database, at_once: int) -> set[int]:
    """The backend of each of ``at_once`` transactions held open together."""
    entered = 0
    all_in = asyncio.Event()

    async def work(conn: AsyncConnection) -> int:
        nonlocal entered
        pid = int(await conn.scalar(text("SELECT pg_backend_pid()")))
        entered += 1
        if entered >= min(at_once, POOL):
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 10)
        return pid

    return set(await asyncio.gather(*(db.transact(work) for _ in range(at_once))))


async def test_more_transactions_than_the_pool_wait_for_its_connections(
    migrated_postgres_url: str,
) -> None:
    db = Database(migrated_postgres_url, pool_size=POOL)
    try:
        first = await backends_in_use(db, POOL)
        assert len(first) == POOL
        # Twice as many as the pool holds: half wait, and every backend is one already open.
        again = await backends_in_use(db, 2 * POOL)
        assert again == first
    finally:
        await db.dispose()
