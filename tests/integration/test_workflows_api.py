"""Workflows stored through the API (every replica sees them), and ai-step nodes prompting the
configured LLM through the Sampler port."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.domain.model import RunStatus
from tests.fakes.llm import FakeLlm, Reply
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status

YAML_FLOW = """
fixed:
  nodes:
    - {id: note, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""

STORED = {
    "name": "summarise",
    "nodes": [
        {"id": "ask", "type": "ai-step", "prompt": "Summarise order {{ input.order }}"},
        {
            "id": "record",
            "type": "connector",
            "connector": "demo-ledger",
            "action": "note",
            "args": {"text": "{{ steps.ask.output.text }}"},
        },
    ],
}


@pytest.fixture
async def llm() -> AsyncIterator[FakeLlm]:
    async with FakeLlm() as server:
        yield server


@pytest.fixture
async def api(migrated_db_url: str, llm: FakeLlm) -> AsyncIterator[Api]:
    extra = f"llm: {{baseUrl: '{llm.base_url}', model: fake-model, timeoutSeconds: 5}}\n"
    async with running_api(migrated_db_url, YAML_FLOW, extra=extra) as api:
        yield api


async def test_store_list_replace_and_run_a_workflow(api: Api, llm: FakeLlm) -> None:
    status, body = await api.call("POST", "/v1/workflows", as_="admin", json=STORED)
    assert status == 201, body
    status, body = await api.call("GET", "/v1/workflows", as_="agent")
    listed = {w["name"]: w for w in body["workflows"]}
    assert listed["fixed"]["source"] == "app.yaml"
    assert listed["summarise"]["source"] == "api"
    assert [n["type"] for n in listed["summarise"]["nodes"]] == ["ai-step", "connector"]
    status, _ = await api.call("POST", "/v1/workflows", as_="admin", json=STORED)
    assert status == 200  # replaced

    llm.script("Order A-7: two items, paid.")
    status, run = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": "summarise", "input": {"order": "A-7"}}
    )
    assert status == 201
    assert await wait_status(api.engine, run["id"], RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert llm.requests[0].prompt == "Summarise order A-7"
    (entry,) = await api.engine.store.ledger(run_id=run["id"])
    assert entry["args"] == {"text": "Order A-7: two items, paid."}


async def test_an_ai_step_whose_llm_fails_fails_the_run_clearly(api: Api, llm: FakeLlm) -> None:
    await api.call("POST", "/v1/workflows", as_="admin", json=STORED)
    llm.script(*[Reply("down", status=500)] * 20)
    _, run = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": "summarise", "input": {"order": "A"}}
    )

    async def failed() -> RunStatus | None:
        clock = api.engine.clock
        assert isinstance(clock, ManualClock)
        if clock.sleepers:  # the step's retry backoff, slept on the test's clock
            clock.advance(seconds=clock.sleepers[-1])
        status = (await api.engine.store.get_run(run["id"])).status
        return status if status is RunStatus.FAILED else None

    assert await wait_for(failed) == RunStatus.FAILED
    _, body = await api.call("GET", f"/v1/runs/{run['id']}", as_="agent")
    assert body["error"] and "500" in body["error"]
    assert await api.engine.store.ledger(run_id=run["id"]) == []  # nothing after it ran


@pytest.mark.parametrize(
    ("body", "status", "error", "expected"),
    [
        # What the published schema says is refused by it, naming the path (400)...
        (
            {"name": "bad", "nodes": [{"id": "a", "type": "approval", "timeoutMinutes": 2000}]},
            400,
            "invalid_request",
            "body.nodes[0].timeoutMinutes: 2000 is greater than the maximum of 1440",
        ),
        (
            {"name": "bad", "nodes": [{"id": "a", "type": "teleport"}]},
            400,
            "invalid_request",
            "body.nodes[0].type: 'teleport' is not one of",
        ),
        ({"name": "bad", "nodes": [{"": {}}]}, 400, "invalid_request", "body.nodes[0]"),
        # ... what no schema can say by the workflow parser and the configuration (422).
        (
            {
                "name": "bad",
                "nodes": [{"id": "a", "type": "connector", "connector": "nope", "action": "x"}],
            },
            422,
            "invalid_config",
            "nodes[0].connector: unknown connector",
        ),
        (
            {"name": "bad", "nodes": [{"id": "a", "type": "approval", "next": "b"}]},
            422,
            "invalid_config",
            'nodes[0].next: no node has id "b"',
        ),
        (
            {"name": "fixed", "nodes": STORED["nodes"]},
            409,
            "conflict",
            "defined in app.yaml",
        ),
    ],
    ids=[
        "out-of-range",
        "unknown-type",
        "empty-key",
        "unknown-connector",
        "dangling-next",
        "app-yaml-name",
    ],
)
async def test_bad_workflows_are_refused_and_nothing_is_stored(
    api: Api, body: dict, status: int, error: str, expected: str
) -> None:
    got, answer = await api.call("POST", "/v1/workflows", as_="admin", json=body)
    assert got == status, answer
    assert answer["error"] == error
    assert expected in answer["message"]
    assert "bad" not in await api.engine.store.stored_workflows()


async def test_only_admins_store_workflows(api: Api) -> None:
    for who in ("agent", "bob"):
        status, body = await api.call("POST", "/v1/workflows", as_=who, json=STORED)
        assert status == 403, body
    assert await api.engine.store.stored_workflows() == {}
