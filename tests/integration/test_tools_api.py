"""Issue 29 (item 1): an admin token is not a shell. A workflow stored through
``POST /v1/workflows`` runs only the tools ``app.yaml`` declares; any other ``module:function``
is a 422 naming the node's path, and nothing is stored. A declared tool runs off the event loop
under its time limit; a definition stored before the check existed never runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from engine.domain.model import JournalEvent, RunStatus
from tests.support import tools
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status

TOOLS = """
tools:
  normalize: {function: "tests.support.tools:record"}
  slow: {function: "tests.support.tools:slow", timeoutSeconds: 0.2}
"""
YAML_FLOW = """
fixed:
  nodes:
    - {id: note, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""
NOTE = {"id": "note", "type": "connector", "connector": "demo-ledger", "action": "note"}


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, YAML_FLOW, extra=TOOLS) as api:
        yield api


@pytest.mark.parametrize(
    "function",
    ["subprocess:getoutput", "os:system", "builtins:eval", "tests.support.tools:spy"],
    ids=["subprocess", "os-system", "eval", "undeclared-module"],
)
async def test_a_workflow_naming_an_undeclared_function_is_refused(api: Api, function: str) -> None:
    calls = len(tools.CALLS)
    shell = {"id": "shell", "type": "tool", "function": function, "args": {"cmd": "id"}}
    body = {"name": "pwn", "nodes": [NOTE, shell]}
    status, answer = await api.call("POST", "/v1/workflows", as_="admin", json=body)
    assert status == 422, answer
    assert answer["error"] == "invalid_config"
    assert answer["message"].startswith(f'nodes[1].function: "{function}" is not a tool')
    assert answer["problems"] == [answer["message"]]
    assert await api.engine.store.stored_workflows() == {}
    status, _ = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "pwn"})
    assert status == 404
    assert len(tools.CALLS) == calls


async def test_an_undeclared_tool_name_is_refused(api: Api) -> None:
    body = {"name": "pwn", "nodes": [{"id": "t", "type": "tool", "tool": "shell"}]}
    status, answer = await api.call("POST", "/v1/workflows", as_="admin", json=body)
    assert status == 422, answer
    assert answer["message"].startswith('nodes[0].tool: unknown tool "shell"')
    assert await api.engine.store.stored_workflows() == {}


async def test_a_declared_tool_runs_on_a_thread_of_its_own(api: Api) -> None:
    node = {"id": "t", "type": "tool", "tool": "normalize", "args": {"order": "{{ input.o }}"}}
    status, answer = await api.call(
        "POST", "/v1/workflows", as_="admin", json={"name": "norm", "nodes": [node]}
    )
    assert status == 201, answer
    _, run = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": "norm", "input": {"o": "A-7"}}
    )
    assert await wait_status(api.engine, run["id"], RunStatus.COMPLETED) == RunStatus.COMPLETED
    (completed,) = [
        e for e in await api.engine.store.journal(run["id"]) if e.event == "step_completed"
    ]
    assert completed.data["output"]["args"] == {"order": "A-7"}
    assert completed.data["output"]["thread"].startswith("signoff-tool")


async def test_a_definition_stored_before_the_check_never_runs(api: Api) -> None:
    calls = len(tools.CALLS)
    legacy = {
        "name": "old",
        "nodes": [{"id": "t", "type": "tool", "function": "tests.support.tools:spy"}],
    }
    now = datetime(2024, 1, 1, tzinfo=UTC)
    await api.engine.store.put_workflow("old", legacy, "alice", now)
    status, answer = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "old"})
    assert status == 422, answer
    assert 'nodes[0].function: "tests.support.tools:spy" is not a tool' in answer["message"]
    assert len(tools.CALLS) == calls


async def test_a_tool_past_its_time_limit_fails_the_step_once(api: Api) -> None:
    """Its thread cannot be stopped, so the step is not tried again beside it."""
    node: dict[str, Any] = {"id": "t", "type": "tool", "tool": "slow", "args": {"seconds": 1}}
    await api.call("POST", "/v1/workflows", as_="admin", json={"name": "lag", "nodes": [node]})
    _, run = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "lag"})

    async def failed() -> RunStatus | None:
        clock = api.engine.clock
        assert isinstance(clock, ManualClock)
        if clock.sleepers:  # a retry backoff (there should be none), slept on the test's clock
            clock.advance(seconds=clock.sleepers[-1])
        status = (await api.engine.store.get_run(run["id"])).status
        return status if status is RunStatus.FAILED else None

    assert await wait_for(failed, timeout=30) == RunStatus.FAILED
    journal = await api.engine.store.journal(run["id"])
    failures = [e.data for e in journal if e.event == JournalEvent.STEP_FAILED]
    assert [f.get("attempt") for f in failures] == [1]
    assert "tool slow did not finish within 0.2s (not retried" in failures[0]["error"]
    started = [e for e in journal if e.event == JournalEvent.STEP_STARTED]
    assert len(started) == 1
