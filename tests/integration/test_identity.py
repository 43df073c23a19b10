"""Who is acting (issue 22 findings 2 and 4, issue 23): the acting agent is the token's, only
people rate steps, operator takeovers stay within the run's deciders (who is an admin:
test_admins.py). Real HTTP, a real engine and database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.assembly import Engine
from engine.domain.errors import Forbidden
from engine.domain.model import JournalEvent, Role, RunStatus
from tests.fakes.llm import FakeLlm
from tests.support.api import Api, running_api
from tests.support.engines import make_engine, person, wait_status

FLOW = """
refund:
  nodes:
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
"""
CALLS = """
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      refund: {kind: write}
policies:
  - {name: refunds, decision: ask, connector: demo-ledger, action: refund, approvers: [bob]}
"""


@pytest.fixture
async def llm() -> AsyncIterator[FakeLlm]:
    async with FakeLlm() as server:
        yield server


def gate_on(llm: FakeLlm) -> str:
    return (
        f"llm: {{baseUrl: '{llm.base_url}', model: fake-model, timeoutSeconds: 5}}\n"
        "gate: {enabled: true, channels: [web]}\n"
    )


async def start(api: Api, agent: str | None, as_: str = "agent") -> tuple[int, dict[str, object]]:
    body: dict[str, object] = {"workflow": "refund", "input": {"order": "A-1"}}
    if agent is not None:
        body["agent"] = agent
    status, run = await api.call("POST", "/v1/runs", as_=as_, json=body)
    return status, run


# -- the acting agent ------------------------------------------------------------------------


async def test_an_agent_cannot_pose_as_another_and_skip_its_gate(
    migrated_db_url: str, llm: FakeLlm
) -> None:
    async with running_api(migrated_db_url, FLOW, extra=gate_on(llm)) as api:
        await api.token("trusted-bot", Role.AGENT)
        trusted_off = {"enabled": False, "scope": "agent", "key": "trusted-bot"}
        status, body = await api.call("PATCH", "/v1/gate", as_="admin", json=trusted_off)
        assert status == 200, body

        status, body = await start(api, "trusted-bot")  # the "agent" token names another
        assert status == 403, body
        assert body["error"] == "forbidden" and "not this token's agent" in body["message"]
        assert await api.engine.store.list_runs() == []  # nothing stored
        status, body = await api.call(
            "POST",
            "/v1/calls",
            as_="agent",
            json={"connector": "demo-ledger", "action": "refund", "agent": "trusted-bot"},
        )
        assert status == 403 and "not this token's agent" in body["message"], body
        assert await api.engine.store.list_runs() == []

        # Its own name, or a sub-name of it, is the token's agent: the gate is on for it.
        for agent in (None, "agent", "agent/refunds"):
            llm.script(*["YES"] * 5)
            status, run = await start(api, agent)
            assert status == 201, run
            assert run["agent"] == (agent or "agent")
            await wait_status(api.engine, str(run["id"]), RunStatus.COMPLETED)
            journal = await api.engine.store.journal(str(run["id"]))
            scored = [e for e in journal if e.event == JournalEvent.CONFIDENCE_EVALUATED]
            assert [e.step_id for e in scored] == ["refund"], agent

        # The trusted agent itself, through its own token, gets its override.
        status, run = await start(api, None, as_="trusted-bot")
        assert status == 201 and run["agent"] == "trusted-bot", run
        await wait_status(api.engine, str(run["id"]), RunStatus.COMPLETED)
        journal = await api.engine.store.journal(str(run["id"]))
        assert JournalEvent.CONFIDENCE_EVALUATED not in [e.event for e in journal]


async def test_a_sub_agent_gets_its_tokens_gate_settings(
    migrated_db_url: str, llm: FakeLlm
) -> None:
    async with running_api(migrated_db_url, FLOW, extra=gate_on(llm)) as api:
        agent_off = {"enabled": False, "scope": "agent", "key": "agent"}
        status, body = await api.call("PATCH", "/v1/gate", as_="admin", json=agent_off)
        assert status == 200, body
        status, run = await start(api, "agent/refunds")
        assert status == 201, run
        await wait_status(api.engine, str(run["id"]), RunStatus.COMPLETED)
        journal = await api.engine.store.journal(str(run["id"]))
        assert JournalEvent.CONFIDENCE_EVALUATED not in [e.event for e in journal]
        assert llm.requests == []


async def test_a_person_cannot_name_an_agent(migrated_db_url: str) -> None:
    async with running_api(migrated_db_url, FLOW) as api:
        status, body = await start(api, "billing-bot", as_="admin")  # alice's token is "admin"
        assert status == 403, body
        status, run = await start(api, None, as_="admin")
        assert status == 201 and run["agent"] is None, run


async def test_held_calls_record_the_tokens_agent(migrated_db_url: str) -> None:
    async with running_api(migrated_db_url, FLOW, extra=CALLS) as api:
        call = {"connector": "demo-ledger", "action": "refund", "args": {"order": "o"}}
        status, body = await api.call(
            "POST", "/v1/calls", as_="agent", json={**call, "agent": "agent/refunds"}
        )
        assert status == 202, body
        run = await api.engine.store.get_run(body["executionId"])
        assert run.agent == "agent/refunds"


# -- ratings ---------------------------------------------------------------------------------


async def test_agents_cannot_rate_steps_and_a_persons_rating_stays(migrated_db_url: str) -> None:
    async with running_api(migrated_db_url, FLOW) as api:
        status, run = await start(api, None)
        assert status == 201, run
        run_id = str(run["id"])
        await wait_status(api.engine, run_id, RunStatus.COMPLETED)
        path = f"/v1/runs/{run_id}/feedback"
        status, body = await api.call(
            "POST", path, as_="bob", json={"stepId": "refund", "score": 1}
        )
        assert status == 201, body
        status, body = await api.call(
            "POST", path, as_="agent", json={"stepId": "refund", "score": 5}
        )
        assert status == 403 and body["error"] == "forbidden", body
        assert "agents cannot rate steps" in body["message"]
        await api.token("bob-agent", Role.AGENT, "bob")  # an agent acting for bob is no person
        status, body = await api.call(
            "POST", path, as_="bob-agent", json={"stepId": "refund", "score": 5}
        )
        assert status == 403, body
        journal = await api.engine.store.journal(run_id)
        rated = [(e.data["by"], e.data["score"]) for e in journal if e.event == "feedback_recorded"]
        assert rated == [("bob", 1)]


# -- operator takeovers ----------------------------------------------------------------------

TAKEOVER_FLOWS = """
pay:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: lookup, args: {order: x}}
    - {id: approve, type: approval, approvers: [bob]}
"""


@pytest.fixture
async def idle_engine(migrated_db_url: str) -> AsyncIterator[Engine]:
    """An engine whose workers never start: its runs stay queued, so takeovers can be asked."""
    engine = make_engine(migrated_db_url, TAKEOVER_FLOWS)
    try:
        yield engine
    finally:
        await engine.stop()


async def test_only_the_runs_deciders_and_admins_open_a_takeover(idle_engine: Engine) -> None:
    engine = idle_engine
    run, _ = await engine.runs.start_run("pay", {}, person("dave"))
    for outsider in ("carol", "dave"):  # carol approves for the project, but not this run
        with pytest.raises(Forbidden, match="is not an approver of this run"):
            await engine.approvals.request(run.id, person(outsider), reason="mine")
    with pytest.raises(Forbidden, match=r"approvers: carol may not decide this run"):
        await engine.approvals.request(run.id, person("bob"), reason="x", approvers=["carol"])
    assert await engine.store.list_takeovers(run_id=run.id) == []  # nothing created

    created = await engine.approvals.request(run.id, person("bob"), reason="mine")
    assert created.approvers == ("bob",)  # bounded by the run, not open to any approver
    with pytest.raises(Forbidden, match="not an approver"):
        await engine.approvals.deny(created.id, person("carol"))
    assert (await engine.store.get_takeover(created.id)).status.value == "pending"


async def test_an_admin_may_open_a_takeover_naming_admins(idle_engine: Engine) -> None:
    engine = idle_engine
    run, _ = await engine.runs.start_run("pay", {}, person("dave"))
    admin = engine.principal_for_person("alice")
    created = await engine.approvals.request(run.id, admin, reason="ops", approvers=["alice"])
    assert created.approvers == ("alice",)


async def test_takeover_bounds_over_http(migrated_db_url: str) -> None:
    async with running_api(migrated_db_url, "{}\n") as api:
        # A run of a workflow the API stored: approvers [bob]. With all workers idle it runs
        # at once, so the takeover asks on a finished run: the refusal still comes first.
        nodes = [{"id": "approve", "type": "approval", "approvers": ["bob"]}]
        status, body = await api.call(
            "POST", "/v1/workflows", as_="admin", json={"name": "pay", "nodes": nodes}
        )
        assert status == 201, body
        status, run = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "pay"})
        assert status == 201, run
        await wait_status(api.engine, run["id"], RunStatus.WAITING)
        path = f"/v1/runs/{run['id']}/takeover/request"
        status, body = await api.call("POST", path, as_="carol", json={"reason": "me"})
        assert status == 403 and "not an approver of this run" in body["message"], body
        status, body = await api.call(
            "POST", path, as_="bob", json={"reason": "me", "approvers": ["carol"]}
        )
        assert status == 403 and "carol may not decide this run" in body["message"], body
        status, body = await api.call("POST", path, as_="bob", json={"reason": "me"})
        assert status == 409, body  # bob may: the run is waiting, not queued or running
