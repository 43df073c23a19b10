"""Expression limits on the real engine and server (issue 22, finding 3): a run whose argument
would loop for hours fails that step with ``expression limit: ...`` in its journal while the
engine runs other work and the server answers /healthz; a run picked up again after a
restart fails as fast; a workflow that shows such a bomb is refused when it is stored."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from engine.assembly import Engine
from engine.domain.model import JournalEvent, RunStatus
from tests.support.api import Api, running_api
from tests.support.engines import AGENT, make_engine, wait_for, wait_status
from tests.support.waiting import quiet

# Bounds from the input: nothing to see when the workflow is loaded; 10**10 iterations when
# it runs (before the limits, the event loop never came back).
SPIN = "{% for i in range(input.n) %}{% for j in range(input.n) %}{% endfor %}{% endfor %}"
FLOWS = f"""
spin:
  nodes:
    - {{id: prepare, type: connector, connector: demo-ledger, action: note, args: {{text: ok}}}}
    - {{id: spin, type: connector, connector: demo-ledger, action: note,
       args: {{text: "{SPIN}"}}}}
quick:
  nodes:
    - {{id: note, type: connector, connector: demo-ledger, action: note,
       args: {{text: "{{{{ input.text }}}}"}}}}
"""
N = 100_000


@pytest.fixture
async def engine(migrated_db_url: str) -> AsyncIterator[Engine]:
    eng = make_engine(migrated_db_url, FLOWS)
    await eng.start()
    yield eng
    await eng.stop()


async def assert_failed_at_the_limit(engine: Engine, run_id: str, step: str) -> None:
    assert await wait_status(engine, run_id, RunStatus.FAILED) == RunStatus.FAILED
    run = await engine.store.get_run(run_id)
    assert run.error is not None and run.error.startswith("expression limit: more than 100,000")
    journal = await engine.store.journal(run_id)
    assert [(e.event, e.step_id) for e in journal[-2:]] == [
        (JournalEvent.STEP_FAILED, step),
        (JournalEvent.RUN_FAILED, step),
    ]
    assert journal[-2].data["error"].startswith("expression limit: ")
    assert journal[-2].data["final"] is True  # failed, not to be retried


async def test_a_spinning_argument_fails_its_step_and_the_engine_goes_on(engine: Engine) -> None:
    started = time.perf_counter()
    spin, _ = await engine.runs.start_run("spin", {"n": N}, AGENT)
    quick, _ = await engine.runs.start_run("quick", {"text": "meanwhile"}, AGENT)
    assert await wait_status(engine, quick.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    await assert_failed_at_the_limit(engine, spin.id, "spin")
    assert time.perf_counter() - started < 5
    ledger = await engine.store.ledger(run_id=spin.id)
    assert [row["step_id"] for row in ledger] == ["prepare"]  # spin never reached its connector

    async def idle() -> bool:
        return engine.workers.active == 0  # the worker lived on; nothing is picked up again

    await wait_for(idle)
    assert (await engine.store.get_run(spin.id)).status == RunStatus.FAILED


async def test_a_run_picked_up_after_a_restart_fails_as_fast(migrated_db_url: str) -> None:
    """The run was queued by a process that went away before it ran; the next process picks
    it up, and the limits hold on that evaluation too: it fails, it does not hang again."""
    before = make_engine(migrated_db_url, FLOWS, name="before")
    run, _ = await before.runs.start_run("spin", {"n": N}, AGENT)
    await before.stop()  # never started: nothing ran
    after = make_engine(migrated_db_url, FLOWS, name="after")
    await after.start()
    try:
        started = time.perf_counter()
        await assert_failed_at_the_limit(after, run.id, "spin")
        assert time.perf_counter() - started < 5
    finally:
        await after.stop()


async def test_a_stored_workflow_an_older_version_accepted_fails_its_run(
    migrated_db_url: str,
) -> None:
    """Stored before the loader checked expressions: its runs fail naming the problem (they
    used to reach the worker as an error and be handed on for ever)."""
    eng = make_engine(migrated_db_url, FLOWS)
    now = eng.clock.now()
    good = {"nodes": [{"id": "a", "type": "connector", "connector": "demo-ledger",
                       "action": "note", "args": {"text": "ok"}}]}  # fmt: skip
    await eng.store.put_workflow("stored", good, "alice", now)
    run, _ = await eng.runs.start_run("stored", {}, AGENT)
    bomb = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    good["nodes"][0]["args"] = {"text": bomb}
    await eng.store.put_workflow("stored", good, "alice", now)  # as an older version stored it
    await eng.start()
    try:
        assert await wait_status(eng, run.id, RunStatus.FAILED) == RunStatus.FAILED
        error = (await eng.store.get_run(run.id)).error or ""
        assert error.startswith(
            "workflow 'stored' is invalid: nodes[0].args.text: expression limit"
        )
    finally:
        await eng.stop()


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, FLOWS) as api:
        yield api


async def test_healthz_answers_while_spinning_runs_are_processed(api: Api) -> None:
    ids = []
    for _ in range(3):
        status, run = await api.call(
            "POST", "/v1/runs", as_="agent", json={"workflow": "spin", "input": {"n": N}}
        )
        assert status == 201, run
        ids.append(run["id"])
    slowest = 0.0

    async def all_failed() -> bool:
        runs = [await api.engine.store.get_run(i) for i in ids]
        return all(r.status == RunStatus.FAILED for r in runs)

    deadline = time.perf_counter() + 10
    while not await all_failed():
        assert time.perf_counter() < deadline, "the runs did not fail"
        started = time.perf_counter()
        status, body = await api.call("GET", "/healthz")
        slowest = max(slowest, time.perf_counter() - started)
        assert status == 200, body
        await quiet(0.01)  # a short real pause between probes
    assert slowest < 1.0, f"/healthz took {slowest:.2f} s"
    for run_id in ids:
        _, body = await api.call("GET", f"/v1/runs/{run_id}", as_="agent")
        assert body["status"] == "failed"
        assert body["error"].startswith("expression limit: ")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "loops of 10,000,000,000 iterations",
        ),
        ("{{ 'a' * 10**8 }}", "a value repeated 100,000,000 times"),
        ("{{ input.x|center(10**9) }}", "a width of 1,000,000,000"),
    ],
)
async def test_storing_a_workflow_with_a_bomb_is_refused(api: Api, text: str, says: str) -> None:
    body = {
        "name": "bomb",
        "nodes": [
            {"id": "ok", "type": "connector", "connector": "demo-ledger", "action": "note",
             "args": {"text": "fine"}},
            {"id": "bad", "type": "connector", "connector": "demo-ledger", "action": "note",
             "args": {"text": text}},
        ],
    }  # fmt: skip
    status, answer = await api.call("POST", "/v1/workflows", as_="admin", json=body)
    assert status == 422, answer  # valid against the schema, refused by the expression limits
    assert answer["error"] == "invalid_config"
    assert f"nodes[1].args.text: expression limit: {says}" in answer["message"]
    assert "bomb" not in await api.engine.store.stored_workflows()
