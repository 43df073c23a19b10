"""A ``workflow`` node starts a child run and waits for it: a parked child parks its parent,
releasing the child resumes the parent when the child completes, a failed child fails the
parent's step."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.assembly import Engine
from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.support.engines import AGENT, make_engine, person, wait_for, wait_status

FLOWS = """
child-approval:
  nodes:
    - {id: approve, type: approval, reason: "Child refund of {{ input.order }}"}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
parent:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: note,
       args: {text: "parent of {{ input.order }}"}}
    - {id: child, type: workflow, workflow: child-approval, args: {order: "{{ input.order }}"}}
    - {id: finish, type: connector, connector: demo-ledger, action: note,
       args: {text: "child said {{ steps.child.output.output.action }}"}}
outer:
  nodes:
    - {id: inner, type: workflow, workflow: parent, args: {order: "{{ input.order }}"}}
"""


@pytest.fixture
async def engine(migrated_db_url: str) -> AsyncIterator[Engine]:
    eng = make_engine(migrated_db_url, FLOWS)
    await eng.start()
    yield eng
    await eng.stop()


async def child_of(engine: Engine, parent_id: str) -> str:
    """The child run ``parent_id`` started, once that child is parked."""

    async def parked_child() -> str | None:
        for run in await engine.store.list_runs():
            if run.parent_run_id == parent_id and run.status == RunStatus.WAITING:
                return run.id
        return None

    child_id: str = await wait_for(parked_child)
    return child_id


async def ledger(engine: Engine) -> list[tuple[str | None, str]]:
    return [(row["step_id"], row["action"]) for row in await engine.store.ledger()]


async def test_parked_child_parks_parent_and_its_release_resumes_it(engine: Engine) -> None:
    parent, _ = await engine.runs.start_run("parent", {"order": "N-1"}, AGENT)
    child_id = await child_of(engine, parent.id)
    assert await wait_status(engine, parent.id, RunStatus.WAITING) == RunStatus.WAITING
    child = await engine.store.get_run(child_id)
    assert (child.parent_run_id, child.parent_step_id) == (parent.id, "child")
    assert child.input == {"order": "N-1"}
    assert await engine.store.list_takeovers(run_id=parent.id) == []
    (request,) = await engine.store.list_takeovers(run_id=child_id)
    assert request.reason == "Child refund of N-1"

    async def nothing_held() -> bool:
        return engine.workers.active == 0  # both parked: no task holds either

    await wait_for(nothing_held)

    # grant alone (take over) keeps both parked; the release hands the child back
    await engine.approvals.grant(request.id, person("bob"))
    assert (await engine.store.get_run(child_id)).status == RunStatus.WAITING
    assert (await engine.store.get_run(parent.id)).status == RunStatus.WAITING
    await engine.approvals.release(request.id, person("bob"))

    assert await wait_status(engine, parent.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    child = await engine.store.get_run(child_id)
    assert child.status == RunStatus.COMPLETED
    assert await ledger(engine) == [("prepare", "note"), ("act", "refund"), ("finish", "note")]
    journal = await engine.store.journal(parent.id)
    step = next(
        e for e in journal if e.event == JournalEvent.STEP_COMPLETED and e.step_id == "child"
    )
    assert step.data["output"] == {"runId": child_id, "output": child.output}
    assert child.output["action"] == "refund"
    resumed = [e for e in journal if e.event == JournalEvent.RUN_RESUMED]
    assert [(e.data["childRunId"], e.data["childStatus"]) for e in resumed] == [
        (child_id, "completed")
    ]
    rows = await engine.store.ledger()
    assert rows[-1]["args"] == {"text": "child said refund"}


async def test_denied_child_fails_the_parent_step(engine: Engine) -> None:
    parent, _ = await engine.runs.start_run("parent", {"order": "N-2"}, AGENT)
    child_id = await child_of(engine, parent.id)
    (request,) = await engine.store.list_takeovers(run_id=child_id)
    await engine.approvals.deny(request.id, person("carol"), notes="not this one")

    assert await wait_status(engine, parent.id, RunStatus.FAILED) == RunStatus.FAILED
    child = await engine.store.get_run(child_id)
    assert child.status == RunStatus.FAILED
    assert child.error == "denied by carol: not this one"
    run = await engine.store.get_run(parent.id)
    assert run.error == f"child run {child_id} failed: denied by carol: not this one"
    failed = [
        e.step_id
        for e in await engine.store.journal(parent.id)
        if e.event == JournalEvent.STEP_FAILED
    ]
    assert failed == ["child"]
    assert await ledger(engine) == [("prepare", "note")]  # finish never ran


async def test_nested_two_deep(engine: Engine) -> None:
    outer, _ = await engine.runs.start_run("outer", {"order": "N-3"}, AGENT)
    middle_id = await child_of(engine, outer.id)
    inner_id = await child_of(engine, middle_id)
    (request,) = await engine.store.list_takeovers(run_id=inner_id)
    await engine.approvals.grant(request.id, person("carol"), release=True)
    assert await wait_status(engine, outer.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    middle = await engine.store.get_run(middle_id)
    outer_run = await engine.store.get_run(outer.id)
    assert outer_run.output == {"runId": middle_id, "output": middle.output}
    assert middle.output["action"] == "note"


async def test_cancelling_the_parent_cancels_the_parked_child(engine: Engine) -> None:
    parent, _ = await engine.runs.start_run("parent", {"order": "N-4"}, AGENT)
    child_id = await child_of(engine, parent.id)
    (request,) = await engine.store.list_takeovers(run_id=child_id)
    cancelled = await engine.approvals.cancel_run(parent.id, person("alice", Role.ADMIN))
    assert [r.id for r in cancelled] == [request.id]
    assert (await engine.store.get_run(parent.id)).status == RunStatus.CANCELLED
    assert (await engine.store.get_run(child_id)).status == RunStatus.CANCELLED
    assert (await engine.store.get_takeover(request.id)).status == TakeoverStatus.CANCELLED
