"""Replicas on one PostgreSQL database wake each other with LISTEN/NOTIFY: with polling set to
a minute, a run queued through one replica is picked up by another within a second."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from engine.adapters.clock import SystemClock
from engine.domain.model import RunStatus
from tests.support.engines import AGENT, make_engine, person, wait_for, wait_status
from tests.support.waiting import quiet, until

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
    await worker.start()  # returns once its listener listens
    try:
        started = time.perf_counter()
        run, _ = await front.runs.start_run("flow", {}, AGENT)  # front runs no workers
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


@pytest.mark.postgres
async def test_a_notification_wakes_only_what_it_made_ready(migrated_postgres_url: str) -> None:
    """A queued run wakes the other replica's workers, not its outbox dispatcher (whose claim
    would be a wasted round trip); a queued chat message wakes the dispatcher only."""
    from sqlalchemy.engine import Connection

    from engine.adapters.store.db import OUTBOX_READY, RUNS_READY, mark_ready

    slow_poll = "{workers: 4, leaseSeconds: 30, pollSeconds: 60}"
    front = make_engine(migrated_postgres_url, FLOW, clock=SystemClock(), server=slow_poll)
    other = make_engine(migrated_postgres_url, FLOW, clock=SystemClock(), server=slow_poll)
    woken = {"workers": 0, "dispatcher": 0}

    def counting(name: str, wake: Callable[[], None]) -> Callable[[], None]:
        def counted() -> None:
            woken[name] += 1
            wake()

        return counted

    other.workers.wake = counting("workers", other.workers.wake)  # type: ignore[method-assign]
    other.dispatcher.wake = counting("dispatcher", other.dispatcher.wake)  # type: ignore[method-assign]
    await other.start()
    try:
        # On connecting: both, once.
        await until(lambda: woken == {"workers": 1, "dispatcher": 1}, 5, what=str(woken))

        async def notify(what: str) -> dict[str, int]:
            before = dict(woken)

            def work(conn: Connection) -> None:
                mark_ready(conn, what)

            await front.db.transact(work)
            await until(lambda: woken != before, 5, what=f"no wake-up for {what}")
            await quiet(0.2)  # anything else it would wake
            return {name: woken[name] - before[name] for name in woken}

        assert await notify(RUNS_READY) == {"workers": 1, "dispatcher": 0}
        assert await notify(OUTBOX_READY) == {"workers": 0, "dispatcher": 1}
    finally:
        await other.stop()
        await front.stop()


@pytest.mark.postgres
async def test_start_listens_before_the_workers_first_claim(migrated_postgres_url: str) -> None:
    """The listener's catch-up wake-up (for what was committed while it was not listening)
    comes before the first claim: after that claim, nothing says runs may be queued, so a
    decision with every slot busy waits for a slot instead of queueing its run. (A catch-up
    after the claim made such a decision queue its run: a CI failure of
    test_with_every_slot_busy_a_decision_takes_the_first_slot_freed.)"""
    slow_poll = "{workers: 1, leaseSeconds: 30, pollSeconds: 60}"
    engine = make_engine(migrated_postgres_url, FLOW, clock=SystemClock(), server=slow_poll)
    order: list[str] = []
    wake, claim = engine.workers.wake, engine.store.claim_runs

    def woken() -> None:
        order.append("wake")
        wake()

    async def claimed(*args: object, **kwargs: object) -> list[str]:
        ids = await claim(*args, **kwargs)  # type: ignore[arg-type]
        order.append("claim")
        return ids

    engine.workers.wake = woken  # type: ignore[method-assign]
    engine.store.claim_runs = claimed  # type: ignore[method-assign]
    await engine.start()
    try:
        assert engine.listener is not None and engine.listener.first_attempt.is_set()

        async def claimed_once() -> bool:
            return "claim" in order

        # Noted in the claim loop's own step, which takes the outcome in before it yields.
        await wait_for(claimed_once)
        may_wait = engine.workers.waits_for_slots
    finally:
        await engine.stop()
    assert order == ["wake", "claim"]
    assert may_wait


async def test_a_listener_that_cannot_connect_is_not_waited_for() -> None:
    """``Engine.start`` waits for the first attempt to listen, not for a success: with
    PostgreSQL out of reach the attempt fails at once and polling goes on."""
    from engine.adapters.store.listen import PgListener

    woken: list[str] = []
    listener = PgListener(
        "postgresql+asyncpg://nobody@127.0.0.1:1/none",
        lambda: woken.append("runs"),
        lambda: woken.append("outbox"),
    )
    listener.start()
    try:
        await asyncio.wait_for(listener.first_attempt.wait(), 5)
    finally:
        await listener.stop()
    assert woken == []  # it never listened, so it caught up on nothing
