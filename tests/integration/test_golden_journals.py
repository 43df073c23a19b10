"""Committed journals of parked runs (``tests/journals/``) resume under the current interpreter,
and a journal that disagrees with the graph fails the run with the nondeterminism error.

A failure here after an interpreter change means runs parked by the previous version would not
resume the same way after an upgrade. Re-record (``python -m tests.support.golden``) only when
that is intended, and say so in the change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.assembly import Engine
from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.support.clock import ManualClock
from tests.support.engines import make_engine, person, wait_status
from tests.support.golden import CALLS_CONFIG, GOLDEN_WORKFLOWS, JOURNALS, load, read

# Five minutes after the recordings: every recorded request is still open (30 minutes).
RESUMED_AT = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
GOLDEN_FILES = sorted(p.name for p in JOURNALS.glob("*.json"))


@pytest.fixture
async def engine(migrated_db_url: str) -> AsyncIterator[Engine]:
    eng = make_engine(migrated_db_url, GOLDEN_WORKFLOWS, clock=ManualClock(RESUMED_AT))
    yield eng
    await eng.stop()


async def loaded(engine: Engine, name: str) -> dict[str, Any]:
    golden = read(name)
    await load(engine.store, golden)
    await engine.start()
    return golden


async def pending_request(engine: Engine, run_id: str) -> str:
    (request,) = await engine.store.list_takeovers(run_id=run_id, statuses=[TakeoverStatus.PENDING])
    return request.id


async def ledger(engine: Engine) -> list[tuple[str | None, str, dict[str, Any]]]:
    return [(r["step_id"], r["action"], r["args"]) for r in await engine.store.ledger()]


def test_every_golden_file_has_a_test() -> None:
    covered = {
        "parked_at_approval.json",
        "parked_at_second_approval.json",
        "parked_child.json",
        "broken_renamed_step.json",
        "broken_node_type.json",
        "held_call.json",
        "gate_diversion.json",
        "admin_override.json",
        "operator_takeover.json",
    }
    assert set(GOLDEN_FILES) == covered


@pytest.mark.parametrize("name", GOLDEN_FILES)
async def test_loading_reproduces_the_recorded_journal(engine: Engine, name: str) -> None:
    golden = read(name)
    await load(engine.store, golden)  # the workers are not started: nothing moves
    for entry in golden["runs"]:
        run = await engine.store.get_run(entry["run"]["id"])
        assert run.status == RunStatus.WAITING
        journal = await engine.store.journal(run.id)
        assert [(e.seq, e.event.value, e.step_id, e.data) for e in journal] == [
            (e["seq"], e["event"], e["stepId"], e["data"]) for e in entry["journal"]
        ]


async def test_parked_at_approval_resumes_on_grant(engine: Engine) -> None:
    golden = await loaded(engine, "parked_at_approval.json")
    run_id = golden["runs"][0]["run"]["id"]
    request_id = await pending_request(engine, run_id)
    await engine.approvals.grant(request_id, person("bob"), release=True, notes="ok")
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    # lookup completed before the recording: it is replayed, not run again
    assert await ledger(engine) == [("refund", "refund", {"order": "A-1", "amount": 42})]
    run = await engine.store.get_run(run_id)
    assert run.output["action"] == "refund"
    events = [(e.event, e.step_id) for e in await engine.store.journal(run_id)]
    assert events.count((JournalEvent.STEP_STARTED, "lookup")) == 1
    assert events[-1] == (JournalEvent.RUN_COMPLETED, None)


async def test_parked_at_approval_follows_on_deny(engine: Engine) -> None:
    golden = await loaded(engine, "parked_at_approval.json")
    run_id = golden["runs"][0]["run"]["id"]
    await engine.approvals.deny(await pending_request(engine, run_id), person("carol"))
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await ledger(engine) == [("denied", "note", {"text": "refund refused"})]


async def test_parked_at_second_approval_resumes(engine: Engine) -> None:
    golden = await loaded(engine, "parked_at_second_approval.json")
    run_id = golden["runs"][0]["run"]["id"]
    request_id = await pending_request(engine, run_id)
    await engine.approvals.grant(request_id, person("carol"), release=True)
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await ledger(engine) == []  # lookup and refund ran before the recording
    run = await engine.store.get_run(run_id)
    assert run.output == {
        "requestId": request_id,
        "outcome": "approved",
        "approved": True,
        "by": "carol",
        "notes": None,
    }
    journal = await engine.store.journal(run_id)
    completed = [e.step_id for e in journal if e.event == JournalEvent.STEP_COMPLETED]
    assert completed == ["lookup", "manager", "refund", "audit"]


async def test_parked_child_resumes_its_parent(engine: Engine) -> None:
    golden = await loaded(engine, "parked_child.json")
    parent_id, child_id = (entry["run"]["id"] for entry in golden["runs"])
    await engine.approvals.grant(
        await pending_request(engine, child_id), person("bob"), release=True
    )
    assert await wait_status(engine, parent_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    child = await engine.store.get_run(child_id)
    assert child.status == RunStatus.COMPLETED
    assert await ledger(engine) == [
        ("act", "refund", {"order": "C-3"}),
        ("finish", "note", {"text": "child said refund"}),
    ]
    step = next(
        e
        for e in await engine.store.journal(parent_id)
        if e.event == JournalEvent.STEP_COMPLETED and e.step_id == "child"
    )
    assert step.data["output"] == {"runId": child_id, "output": child.output}


async def test_held_call_runs_once_released(migrated_db_url: str) -> None:
    engine = make_engine(
        migrated_db_url, GOLDEN_WORKFLOWS, clock=ManualClock(RESUMED_AT), extra=CALLS_CONFIG
    )
    try:
        golden = await loaded(engine, "held_call.json")
        run_id = golden["runs"][0]["run"]["id"]
        await engine.approvals.grant(
            await pending_request(engine, run_id), person("bob"), release=True
        )
        assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
        assert await ledger(engine) == [("call", "refund", {"order": "D-4", "amount": 12})]
    finally:
        await engine.stop()


async def test_gate_diversion_runs_the_step_once_granted(engine: Engine) -> None:
    golden = await loaded(engine, "gate_diversion.json")
    run_id = golden["runs"][0]["run"]["id"]
    await engine.approvals.grant(await pending_request(engine, run_id), person("bob"), release=True)
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    # the diverted step runs with its recorded arguments; the lookup is replayed
    assert await ledger(engine) == [("refund", "refund", {"order": "E-5", "amount": 420})]


async def test_admin_override_then_the_audit_resumes(engine: Engine) -> None:
    golden = await loaded(engine, "admin_override.json")
    run_id = golden["runs"][0]["run"]["id"]
    await engine.approvals.grant(
        await pending_request(engine, run_id), person("carol"), release=True
    )
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await ledger(engine) == []  # the refund ran before the recording
    journal = await engine.store.journal(run_id)
    granted = [e.data for e in journal if e.event == JournalEvent.TAKEOVER_GRANTED]
    assert [g.get("override") for g in granted] == ["admin", None]


async def test_operator_takeover_runs_the_step_once_released(engine: Engine) -> None:
    golden = await loaded(engine, "operator_takeover.json")
    run_id = golden["runs"][0]["run"]["id"]
    admin = person("alice", Role.ADMIN)
    await engine.approvals.grant(await pending_request(engine, run_id), admin, release=True)
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await ledger(engine) == [("act", "refund", {"order": "G-7"})]


@pytest.mark.parametrize("name", ["broken_renamed_step.json", "broken_node_type.json"])
async def test_a_journal_that_disagrees_with_the_graph_fails_loudly(
    engine: Engine, name: str
) -> None:
    golden = await loaded(engine, name)
    run_id = golden["runs"][0]["run"]["id"]
    await engine.approvals.grant(await pending_request(engine, run_id), person("bob"), release=True)
    assert await wait_status(engine, run_id, RunStatus.FAILED) == RunStatus.FAILED
    run = await engine.store.get_run(run_id)
    assert run.error is not None and run.error.startswith("nondeterminism:"), run.error
    assert "lookup" in run.error
    assert await ledger(engine) == []  # it never guessed its way into a side effect
    last = (await engine.store.journal(run_id))[-1]
    assert last.event == JournalEvent.RUN_FAILED
