"""Replicas on one PostgreSQL database wake each other with LISTEN/NOTIFY: with polling set to
a minute, a run queued through one replica is picked up by another within a second."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.model import RunStatus
from engine.ports import SystemClock
from tests.support.engines import AGENT, make_engine, person, wait_status

FLOW = """
flow:
  nodes:
    - {id: approve, type: approval, channels: [web]}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""


@pytest.mark.postgres
async def test_notify_wakes_the_other_replica(migrated_postgres_url: str) -> None:
    migrated_db_url = migrated_postgres_url
    # Neither replica polls in time: only a notification can make the second one move.
    slow_poll = "{workers: 4, leaseSeconds: 30, pollSeconds: 60}"
    front = make_engine(migrated_db_url, FLOW, clock=SystemClock(), server=slow_poll, name="a")
    worker = make_engine(migrated_db_url, FLOW, clock=SystemClock(), server=slow_poll, name="b")
    await worker.start()
    await asyncio.sleep(0.3)  # the listener connects
    try:
        started = time.perf_counter()
        run, _ = await front.start_run("flow", {}, AGENT)  # front runs no workers
        await wait_status(worker, run.id, RunStatus.WAITING)
        parked_after = time.perf_counter() - started
        (request,) = await front.store.list_takeovers(run_id=run.id)
        started = time.perf_counter()
        await front.approvals.grant(request.id, person("bob"), release=True)
        await wait_status(worker, run.id, RunStatus.COMPLETED)
        resumed_after = time.perf_counter() - started
    finally:
        await worker.stop()
        await front.stop()
    assert parked_after < 5, parked_after
    assert resumed_after < 5, resumed_after
