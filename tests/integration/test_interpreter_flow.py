"""A run parks at an approval, holds nothing, and resumes from it when released."""

from __future__ import annotations

import pytest

from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.support.engines import AGENT, make_engine, person, wait_for, wait_status

REFUND = """
refund:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       channels: [web], onDeny: denied}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}, next: end}
    - {id: denied, type: connector, connector: demo-ledger, action: note,
       args: {text: "refund refused"}}
"""


@pytest.fixture
async def engine(migrated_db_url):
    eng = make_engine(migrated_db_url, REFUND)
    await eng.start()
    yield eng
    await eng.stop()


async def test_park_and_release(engine):
    run, created = await engine.runs.start_run("refund", {"order": "A-1", "amount": 42}, AGENT)
    assert created
    assert await wait_status(engine, run.id, RunStatus.WAITING) == RunStatus.WAITING
    (request,) = await engine.store.list_takeovers(run_id=run.id)
    assert request.status == TakeoverStatus.PENDING
    assert request.details["args"] == {"order": "A-1", "amount": 42}
    assert request.reason == "Refund 42 for A-1"

    async def idle() -> bool:
        return engine.workers.active == 0

    await wait_for(idle)  # parked: no task holds it once the worker has handed it back

    await engine.approvals.grant(request.id, person("bob"), release=True, notes="ok")
    assert await wait_status(engine, run.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    ledger = await engine.store.ledger(run_id=run.id)
    assert [row["action"] for row in ledger] == ["lookup", "refund"]
    events = [e.event for e in await engine.store.journal(run.id)]
    assert events.count(JournalEvent.STEP_COMPLETED) == 3
    assert events[-1] == JournalEvent.RUN_COMPLETED


async def test_deny_follows_on_deny(engine):
    run, _ = await engine.runs.start_run("refund", {"order": "A-2", "amount": 5}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    (request,) = await engine.store.list_takeovers(run_id=run.id)
    await engine.approvals.deny(request.id, person("carol"), notes="too much")
    assert await wait_status(engine, run.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    ledger = await engine.store.ledger(run_id=run.id)
    assert [row["action"] for row in ledger] == ["lookup", "note"]


class JournalProbe:
    """A connector that reads, at the moment it is called, which of its step's events the
    database already holds."""

    def __init__(self) -> None:
        self.engine = None
        self.seen: dict[str, list[JournalEvent]] = {}

    async def call(self, call):
        journal = await self.engine.store.journal(call.run_id)
        self.seen[call.step_id] = [e.event for e in journal if e.step_id == call.step_id]
        return {"ok": True}


async def test_read_actions_commit_step_started_with_their_result(migrated_db_url):
    """A write action is called only once its ``step_started`` is committed (a crash during the
    call retries it with the same key); a ``kind: read`` action has nothing to guard, and its
    ``step_started`` is committed with its result, one transaction fewer."""
    probe = JournalProbe()
    extra = """
    connectors:
      probe:
        type: python
        function: "tests.support.engines:unused"
        actions: {get: {kind: read}, put: {kind: write}}
    """
    flow = """
    probed:
      nodes:
        - {id: read, type: connector, connector: probe, action: get, args: {}}
        - {id: write, type: connector, connector: probe, action: put, args: {}}
    """
    engine = make_engine(migrated_db_url, flow, extra=extra, extra_connectors={"probe": probe})
    probe.engine = engine
    await engine.start()
    try:
        run, _ = await engine.runs.start_run("probed", {}, AGENT)
        assert await wait_status(engine, run.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
        events = [(e.step_id, e.event) for e in await engine.store.journal(run.id)]
    finally:
        await engine.stop()
    assert probe.seen == {"read": [], "write": [JournalEvent.STEP_STARTED]}
    assert events[1:5] == [
        ("read", JournalEvent.STEP_STARTED),
        ("read", JournalEvent.STEP_COMPLETED),
        ("write", JournalEvent.STEP_STARTED),
        ("write", JournalEvent.STEP_COMPLETED),
    ]
