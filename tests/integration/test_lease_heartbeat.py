"""A step that outlasts the lease keeps its run: the worker renews the lease while it waits, so
another replica never takes the run over and calls the step a second time."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

from engine.domain.model import JournalEvent, RunStatus
from engine.ports import ConnectorCall
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, make_engine, wait_status
from tests.support.waiting import until

FLOW = """
slow:
  nodes:
    - {id: work, type: connector, connector: slow, action: go, args: {}}
"""
EXTRA = """
connectors:
  slow: {type: python, function: "tests.support.engines:unused", actions: {go: {kind: write}}}
"""
SERVER = "{workers: 2, leaseSeconds: 5, pollSeconds: 0.05}"
# Shorter than server.leaseSeconds allows (5 s at least): renewed every 1.5 s of the manual
# clock, which the test moves a beat at a time; the step takes more than two leases.
LEASE = timedelta(seconds=4.5)
BEAT = LEASE.total_seconds() / 3
STEP_SECONDS = 11.25


class Slow:
    """A connector whose call takes ``STEP_SECONDS`` on the engines' (manual) clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.calls: list[str] = []

    async def call(self, call: ConnectorCall) -> dict[str, bool]:
        self.calls.append(call.idempotency_key)
        await self.clock.sleep(STEP_SECONDS)
        return {"ok": True}


async def test_a_step_longer_than_the_lease_runs_once(migrated_db_url: str) -> None:
    """Two replicas on one manual clock; the clock moves a beat at a time, and after each
    move the run's lease reaches a whole lease ahead again (the renewer beat on the clock),
    while the other replica's workers keep claiming and never get the run."""
    clock = ManualClock()
    slow = Slow(clock)
    engines = [
        make_engine(
            migrated_db_url,
            FLOW,
            extra=EXTRA,
            server=SERVER,
            name=name,
            clock=clock,
            extra_connectors={"slow": slow},
        )
        for name in ("a", "b")
    ]
    for engine in engines:
        engine.workers.lease = LEASE
        await engine.start()
    try:
        run, _ = await engines[0].runs.start_run("slow", {}, AGENT)
        await until(lambda: slow.calls, what="the step started")

        def renewers_asleep() -> bool:  # no other timer sleeps exactly a beat
            return clock.sleepers.count(BEAT) == len(engines)

        async def renewed() -> bool:
            current = await engines[0].store.get_run(run.id)
            until_ = current.lease_expires_at
            return until_ is not None and until_ >= clock.now() + LEASE

        for beat in range(1, math.ceil(STEP_SECONDS / BEAT) + 1):
            # Both renewers asleep again before the clock moves, so each wakes on this move.
            await until(renewers_asleep, what="the renewers asleep")
            clock.advance(seconds=BEAT)
            if beat * BEAT < STEP_SECONDS:
                await until(renewed, what=f"the lease renewed after {beat} beats")
        status = await wait_status(engines[1], run.id, RunStatus.COMPLETED)
        journal = await engines[1].store.journal(run.id)
    finally:
        for engine in engines:
            await engine.stop()
    assert status == RunStatus.COMPLETED
    assert slow.calls == [f"{run.id}:work:1"]
    assert [e.event for e in journal].count(JournalEvent.STEP_STARTED) == 1


class Held:
    """A connector whose call waits until the test lets it return."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def call(self, call: ConnectorCall) -> dict[str, bool]:
        self.calls.append(call.idempotency_key)
        self.called.set()
        await self.release.wait()
        return {"ok": True}


async def test_a_run_claimed_again_under_its_own_task_is_not_advanced_twice(
    migrated_db_url: str,
) -> None:
    """The lease runs out under a step still in flight (the clock jumps past it, and the
    renewer's beat on that jump is held up, like a round trip slower than the lease, until
    after the claim) and this process's own claim takes the run back: the task in flight goes
    on under the renewed lease; no second task calls the step again."""
    held = Held()
    engine = make_engine(
        migrated_db_url,
        FLOW,
        extra=EXTRA,
        server="{workers: 2, leaseSeconds: 30, pollSeconds: 60}",
        extra_connectors={"slow": held},
    )
    claimed: list[list[str]] = []
    claim = engine.store.claim_runs
    reclaimed = asyncio.Event()

    async def noting_claims(*args: Any, **kwargs: Any) -> list[str]:
        ids = await claim(*args, **kwargs)
        claimed.append(ids)
        if ids:
            reclaimed.set()  # the worker loop spawns (or not) before this test runs again
        return ids

    renew = engine.store.renew_leases

    async def late_renewals(*args: Any, **kwargs: Any) -> int:
        await reclaimed.wait()  # the renewer's beat arrives after the claim took the run back
        return await renew(*args, **kwargs)

    engine.store.claim_runs = noting_claims  # type: ignore[method-assign]
    engine.store.renew_leases = late_renewals  # type: ignore[method-assign]
    await engine.start()
    try:
        run, _ = await engine.runs.start_run("slow", {}, AGENT)
        await asyncio.wait_for(held.called.wait(), 10)
        assert engine.workers.active == 1
        assert isinstance(engine.clock, ManualClock)
        engine.clock.advance(seconds=31)  # the run's lease (30 s) has run out
        engine.workers.wake()
        await asyncio.wait_for(reclaimed.wait(), 10)
        active_after_claim = engine.workers.active
        held.release.set()
        status = await wait_status(engine, run.id, RunStatus.COMPLETED)
        journal = await engine.store.journal(run.id)
    finally:
        await engine.stop()
    assert [run.id] in claimed  # its own claim did take it back
    assert active_after_claim == 1
    assert status == RunStatus.COMPLETED
    assert held.calls == [f"{run.id}:work:1"]
    assert [e.event for e in journal].count(JournalEvent.STEP_STARTED) == 1
