"""A step that outlasts the lease keeps its run: the worker renews the lease while it waits, so
another replica never takes the run over and calls the step a second time."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from engine.model import JournalEvent, RunStatus
from engine.ports import ConnectorCall, SystemClock
from tests.support.engines import AGENT, make_engine, wait_status

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
# Shorter than server.leaseSeconds allows: renewed every 0.1 s; the step takes 1 s.
LEASE = timedelta(seconds=0.3)


class Slow:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, call: ConnectorCall) -> dict[str, bool]:
        self.calls.append(call.idempotency_key)
        await asyncio.sleep(1.0)
        return {"ok": True}


async def test_a_step_longer_than_the_lease_runs_once(migrated_db_url: str) -> None:
    slow = Slow()
    engines = [
        make_engine(
            migrated_db_url,
            FLOW,
            extra=EXTRA,
            server=SERVER,
            name=name,
            clock=SystemClock(),
            extra_connectors={"slow": slow},
        )
        for name in ("a", "b")
    ]
    for engine in engines:
        engine.workers.lease = LEASE
        await engine.start()
    try:
        run, _ = await engines[0].start_run("slow", {}, AGENT)
        status = await wait_status(engines[1], run.id, RunStatus.COMPLETED)
        journal = await engines[1].store.journal(run.id)
    finally:
        for engine in engines:
            await engine.stop()
    assert status == RunStatus.COMPLETED
    assert slow.calls == [f"{run.id}:work:1"]
    assert [e.event for e in journal].count(JournalEvent.STEP_STARTED) == 1
