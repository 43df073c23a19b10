"""Expressions end to end: what a connector receives (the demo ledger records its arguments)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.assembly import Engine
from engine.domain.model import JournalEvent, RunStatus
from tests.support.engines import AGENT, make_engine, person, wait_for, wait_status

FLOWS = """
echo:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: approve, type: approval, reason: "Refund {{ input.order }}: {{ input.text }}"}
    - {id: record, type: connector, connector: demo-ledger, action: note,
       args: {text: "{{ input.text }}", said: "said {{ input.text }}",
              amount: "{{ steps.lookup.output.amount }}",
              twice: "{{ steps.lookup.output.amount * 2 }}",
              nested: {list: ["{{ input.text }}", 3, "{{ input.count }}"]}}}
escape:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: note, args: {text: "ok"}}
    - {id: bad, type: connector, connector: demo-ledger, action: note,
       args: {text: "{{ ''.__class__.__mro__ }}"}}
parent:
  nodes:
    - {id: child, type: workflow, workflow: escape, args: {order: "{{ input.missing.id }}"}}
"""


@pytest.fixture
async def engine(migrated_db_url: str) -> AsyncIterator[Engine]:
    eng = make_engine(migrated_db_url, FLOWS)
    await eng.start()
    yield eng
    await eng.stop()


@pytest.mark.parametrize(
    "text", ["{{ 7*7 }}", "{{ cycler.__init__ }}", "{% for i in range(3) %}x{% endfor %}"]
)
async def test_input_reaches_the_connector_literally(engine: Engine, text: str) -> None:
    run_input = {"order": "{{ 6*7 }}", "text": text, "count": 3}
    run, _ = await engine.runs.start_run("echo", run_input, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    (request,) = await engine.store.list_takeovers(run_id=run.id)
    assert request.reason == f"Refund {{{{ 6*7 }}}}: {text}"
    assert request.details["args"]["text"] == text  # the card shows the exact pending value
    await engine.approvals.grant(request.id, person("bob"), release=True)
    assert await wait_status(engine, run.id, RunStatus.COMPLETED) == RunStatus.COMPLETED

    lookup, note = await engine.store.ledger(run_id=run.id)
    assert lookup["args"] == {"order": "{{ 6*7 }}"}
    amount = (await engine.store.journal(run.id))[2].data["output"]["amount"]
    assert isinstance(amount, float)
    assert note["args"] == {
        "text": text,
        "said": f"said {text}",
        "amount": amount,
        "twice": amount * 2,
        "nested": {"list": [text, 3, 3]},
    }
    assert isinstance(note["args"]["amount"], float)
    assert isinstance(note["args"]["nested"]["list"][2], int)


async def test_the_sandbox_fails_the_step_cleanly(engine: Engine) -> None:
    run, _ = await engine.runs.start_run("escape", {}, AGENT)
    assert await wait_status(engine, run.id, RunStatus.FAILED) == RunStatus.FAILED
    failed = await engine.store.get_run(run.id)
    assert failed.error is not None
    assert "unsafe" in failed.error and "__class__" in failed.error
    journal = await engine.store.journal(run.id)
    assert [(e.event, e.step_id) for e in journal[-2:]] == [
        (JournalEvent.STEP_FAILED, "bad"),
        (JournalEvent.RUN_FAILED, "bad"),
    ]
    assert journal[-2].data["final"] is True
    ledger = await engine.store.ledger(run_id=run.id)
    assert [row["step_id"] for row in ledger] == ["prepare"]  # bad never reached its connector

    async def worker_done() -> bool:
        return engine.workers.active == 0  # the worker lived on, with nothing left to do

    await wait_for(worker_done)


async def test_a_child_workflows_failing_arguments_fail_the_step(engine: Engine) -> None:
    """Before, the error reached the worker, which handed the run on to be retried for ever."""
    run, _ = await engine.runs.start_run("parent", {}, AGENT)
    assert await wait_status(engine, run.id, RunStatus.FAILED) == RunStatus.FAILED
    failed = await engine.store.get_run(run.id)
    assert failed.error is not None and "input.missing.id" in failed.error
    journal = await engine.store.journal(run.id)
    assert [(e.event, e.step_id) for e in journal[-2:]] == [
        (JournalEvent.STEP_FAILED, "child"),
        (JournalEvent.RUN_FAILED, "child"),
    ]
