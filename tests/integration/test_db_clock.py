"""Replicas follow the database's clock: one whose own clock is ten minutes off neither
expires a request early nor accepts a decision late."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from engine.adapters.clock import SystemClock
from engine.adapters.store.db import Database
from engine.adapters.store.dbclock import DatabaseClock
from engine.assembly import Engine
from engine.domain.model import RunStatus, TakeoverStatus
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, make_engine, person, wait_status
from tests.support.waiting import settled, until

FLOW = """
flow:
  nodes:
    - {id: approve, type: approval, channels: [web], timeoutMinutes: 5}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""


def replica(url: str, name: str, skew_minutes: float) -> Engine:
    clock = SystemClock(timedelta(minutes=skew_minutes))
    return make_engine(url, FLOW, clock=clock, name=name, sync_clock=True)


@pytest.mark.postgres
@pytest.mark.parametrize("skew", [10, -10])
async def test_a_skewed_replica_decides_expiry_like_the_others(
    migrated_postgres_url: str, skew: float
) -> None:
    honest = replica(migrated_postgres_url, "honest", 0)
    skewed = replica(migrated_postgres_url, "skewed", skew)
    await honest.start()
    await skewed.db_clock.sync()  # type: ignore[union-attr]
    try:
        # The skewed replica's corrected time is the database's, within a second.
        drift = abs(skewed.clock.now() - SystemClock().now())
        assert drift < timedelta(seconds=1), drift
        run, _ = await honest.runs.start_run("flow", {}, AGENT)
        await wait_status(honest, run.id, RunStatus.WAITING)
        (request,) = await honest.store.list_takeovers(run_id=run.id)

        # Five minutes before expiry, a replica ten minutes fast expires nothing...
        assert await skewed.sweeper.sweep_once() == 0
        # ...and a replica ten minutes slow still lets a decision through.
        after = await skewed.approvals.grant(request.id, person("bob"), release=True)
        assert after.status == TakeoverStatus.RELEASED
        await wait_status(honest, run.id, RunStatus.COMPLETED)
    finally:
        await honest.stop()
        await skewed.stop()


async def test_the_database_clock_sleeps_on_its_local_clock(database) -> None:
    """An offset moves the time read, not a wait: a backoff on the database clock waits on
    the local clock (a manual one in tests)."""
    local = ManualClock()
    clock = DatabaseClock(database, local)
    clock.offset = timedelta(minutes=10)
    sleeper = asyncio.create_task(clock.sleep(2))
    for _ in range(10):
        await asyncio.sleep(0)
    assert local.sleepers == [2.0] and not sleeper.done()
    local.advance(seconds=2)
    await asyncio.wait_for(sleeper, 1)


@pytest.mark.postgres
async def test_the_offset_is_measured_again_on_the_local_clock(
    migrated_postgres_url: str,
) -> None:
    """The offset is measured at start and then every ``resync_seconds`` of the local clock:
    moving a manual clock by that much measures it again, nothing else does. PostgreSQL only:
    on SQLite (one process) the engine follows no database clock."""
    database = Database(migrated_postgres_url)
    local = ManualClock()
    clock = DatabaseClock(database, local, resync_seconds=60)
    clock.start()
    try:
        await until(lambda: local.sleepers == [60.0], what="the resync asleep on the clock")
        stale = clock.offset = timedelta(hours=5)  # no measurement could give this one
        local.advance(seconds=59)
        await settled()
        assert clock.offset == stale
        local.advance(seconds=1)
        await until(lambda: clock.offset != stale, what="the offset measured again")
    finally:
        await clock.stop()
        await database.dispose()
