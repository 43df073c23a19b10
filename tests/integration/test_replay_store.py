"""``ReplayGuard`` on a real database (SQLite and PostgreSQL): a key is new once while it is
kept, also for a second guard on the same database (another replica, or this one restarted);
expired keys are taken over and swept, at most once a ``sweep_every``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select, text

from engine.adapters.store import Database, SqlStore
from engine.adapters.store import tables as t
from engine.domain.errors import StoreError
from engine.services.replays import ReplayGuard
from tests.support.clock import ManualClock

KEEP = timedelta(minutes=15)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def guard(database: Database, clock: ManualClock) -> ReplayGuard:
    return ReplayGuard(SqlStore(database), clock)


async def kept(database: Database) -> list[str]:
    def work(conn):  # type: ignore[no-untyped-def]
        return sorted(conn.execute(select(t.seen_requests.c.key)).scalars())

    return await database.transact(work, write=False)


async def test_a_key_is_new_once_while_kept(guard: ReplayGuard, clock: ManualClock) -> None:
    assert await guard.first("slack:signature:v0=aa", KEEP)
    assert not await guard.first("slack:signature:v0=aa", KEEP)
    assert await guard.first("slack:signature:v0=bb", KEEP)
    clock.advance(minutes=14, seconds=59)
    assert not await guard.first("slack:signature:v0=aa", KEEP)


async def test_another_guard_on_the_database_sees_the_key(
    database: Database, migrated_db_url: str, clock: ManualClock
) -> None:
    first = ReplayGuard(SqlStore(database), clock)
    assert await first.first("slack:event:Ev01", KEEP)
    restarted = Database(migrated_db_url)
    try:
        assert not await ReplayGuard(SqlStore(restarted), clock).first("slack:event:Ev01", KEEP)
    finally:
        await restarted.dispose()


async def test_of_many_guards_at_once_exactly_one_is_first(
    database: Database, migrated_db_url: str, clock: ManualClock
) -> None:
    others = [Database(migrated_db_url) for _ in range(3)]
    try:
        guards = [ReplayGuard(SqlStore(db), clock) for db in (database, *others)]
        answers = await asyncio.gather(
            *(g.first("slack:signature:v0=race", KEEP) for g in guards for _ in range(5))
        )
    finally:
        for db in others:
            await db.dispose()
    assert answers.count(True) == 1 and len(answers) == 20


async def test_an_expired_key_is_taken_over_and_swept(
    guard: ReplayGuard, database: Database, clock: ManualClock
) -> None:
    assert await guard.first("old", KEEP)
    assert await guard.first("short", timedelta(minutes=1))
    clock.advance(minutes=15)  # "old" expires now; the last sweep was 15 minutes ago
    assert await guard.first("old", KEEP)  # taken over, kept again from now
    assert await kept(database) == ["old"]  # "short" swept with it
    assert not await guard.first("old", KEEP)


async def test_sweeps_are_at_most_one_a_minute(
    guard: ReplayGuard, database: Database, clock: ManualClock
) -> None:
    assert await guard.first("a", timedelta(seconds=10))  # sweeps (nothing to sweep)
    clock.advance(seconds=30)
    assert await guard.first("b", KEEP)  # "a" has expired, but the last sweep was 30 s ago
    assert await kept(database) == ["a", "b"]
    clock.advance(seconds=30)
    assert await guard.first("c", KEEP)
    assert await kept(database) == ["b", "c"]


async def test_a_sweep_deletes_in_batches(database: Database, clock: ManualClock) -> None:
    store = SqlStore(database)
    for i in range(7):
        assert await store.remember_request(f"k{i}", clock.now(), clock.now())
    assert await store.forget_requests(clock.now(), limit=5) == 5
    assert await store.forget_requests(clock.now(), limit=5) == 2

    def count(conn):  # type: ignore[no-untyped-def]
        return conn.execute(select(func.count()).select_from(t.seen_requests)).scalar_one()

    assert await database.transact(count, write=False) == 0


async def test_when_the_database_cannot_say_the_guard_raises(
    guard: ReplayGuard, database: Database
) -> None:
    def drop(conn):  # type: ignore[no-untyped-def]
        conn.execute(text("DROP TABLE seen_requests"))

    await database.transact(drop)
    with pytest.raises(StoreError):
        await guard.first("k", KEEP)
