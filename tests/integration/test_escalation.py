"""An escalation on a real store: once due, the sweeper asks ``escalateTo`` and they may decide
(``engine.domain.decisions.escalate``, written per request by the store), once; before it, they
may not. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.assembly import Engine
from engine.domain.errors import Forbidden
from engine.domain.model import RunStatus, TakeoverRequest, TakeoverStatus
from engine.services import reminders
from tests.support.engines import AGENT, make_engine, person, wait_for, wait_status

FLOWS = """
escalating:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.order }}", approvers: [bob],
       timeoutMinutes: 60, escalateAfterMinutes: 5, escalateTo: [dave]}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
"""


@pytest.fixture
async def engine(migrated_db_url: str) -> AsyncIterator[Engine]:
    eng = make_engine(migrated_db_url, FLOWS)
    await eng.start()
    yield eng
    await eng.stop()


async def test_the_people_asked_may_decide_once_it_escalates(engine: Engine) -> None:
    run, _ = await engine.runs.start_run("escalating", {"order": "E-1"}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    (request,) = await engine.store.list_takeovers(run_id=run.id)
    assert request.approvers == ("bob",)
    with pytest.raises(Forbidden):
        await engine.approvals.grant(request.id, person("dave"), release=True)

    engine.clock.advance(minutes=4)  # type: ignore[attr-defined]
    assert await reminders.sweep(engine.store, engine.clock) == 0  # not due yet
    engine.clock.advance(minutes=2)  # type: ignore[attr-defined]
    # This sweep or the engine's own sweeper (woken by the clock) escalates it, exactly once.
    swept = await reminders.sweep(engine.store, engine.clock)

    async def escalated() -> TakeoverRequest | None:
        found = await engine.store.get_takeover(request.id)
        return found if found.escalate_at is None else None

    after = await wait_for(escalated)
    assert swept in (0, 1)
    assert await reminders.sweep(engine.store, engine.clock) == 0  # once
    assert after.approvers == ("bob", "dave") and after.status == TakeoverStatus.PENDING

    decided = await engine.approvals.grant(request.id, person("dave"), release=True)
    assert decided.status == TakeoverStatus.RELEASED and decided.decided_by == "dave"
    await wait_status(engine, run.id, RunStatus.COMPLETED)
