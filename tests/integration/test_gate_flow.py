"""End to end over real HTTP: a real engine and database, the LLM a fake OpenAI-compatible
server. A doubtful connector step is diverted to a person, its card shows the score, and it
runs only once approved; with the gate off the same step just runs."""

from __future__ import annotations

import json

import pytest

from bot.api.views import approval_url
from cards.slack.render import render_slack_card
from cards.view import build_view
from cards.web.render import render_web_card
from engine.domain.model import JournalEvent, RunStatus, TakeoverKind
from tests.fakes.llm import FakeLlm, Reply
from tests.support.api import running_api
from tests.support.engines import wait_status

FLOW = """
refund:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
"""
UNANIMOUS = ["YES"] * 5
SPLIT = ["YES", "NO", "YES", "NO", "YES"]


def extra(llm: FakeLlm, gate: str) -> str:
    return f"llm: {{baseUrl: '{llm.base_url}', model: fake-model, timeoutSeconds: 5}}\n{gate}\n"


@pytest.fixture
async def llm():
    async with FakeLlm() as server:
        yield server


async def start(api, order="A-17", amount=420):
    status, run = await api.call(
        "POST",
        "/v1/runs",
        as_="agent",
        json={"workflow": "refund", "input": {"order": order, "amount": amount}},
    )
    assert status == 201, run
    return run["id"]


async def events(api, run_id):
    return await api.engine.store.journal(run_id)


async def test_a_split_vote_is_diverted_and_runs_once_approved(migrated_db_url, llm):
    llm.script(*UNANIMOUS, *SPLIT)  # lookup: 5 of 5; refund: 3 of 5
    gate = "gate: {enabled: true, channels: [web], approvers: [finance]}"
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, gate)) as api:
        run_id = await start(api)
        await wait_status(api.engine, run_id, RunStatus.WAITING)
        assert [r["action"] for r in await api.engine.store.ledger(run_id=run_id)] == ["lookup"]

        (request,) = await api.engine.store.list_takeovers(run_id=run_id)
        assert request.kind == TakeoverKind.GATE and request.step_id == "refund"
        assert request.details["args"] == {"order": "A-17", "amount": 420}  # the exact args
        confidence = request.details["confidence"]
        assert confidence["score"] == 0.6 and confidence["threshold"] == 0.75
        assert confidence["detail"] == "3 of 5 samples said execute"
        assert request.approvers == ("alice", "bob", "carol")  # gate.approvers: finance

        run = await api.engine.store.get_run(run_id)
        link = approval_url("http://signoff.test", request.id)
        view = build_view(request, run, approval_url=link, run_url=None)
        slack = json.dumps(render_slack_card(view))
        assert "0.60" in slack and "0.75" in slack and "3 of 5 samples said execute" in slack
        web = render_web_card(view, csrf_token="t", form_action="/x")
        assert "0.60" in web and "3 of 5 samples said execute" in web

        status, body = await api.call(
            "POST",
            f"/v1/runs/{run_id}/takeover/{request.id}/grant",
            as_="bob",
            json={"release": True},
        )
        assert status == 200, body
        await wait_status(api.engine, run_id, RunStatus.COMPLETED)
        ledger = await api.engine.store.ledger(run_id=run_id)
        assert [(r["action"], r["args"]) for r in ledger] == [
            ("lookup", {"order": "A-17"}),
            ("refund", {"order": "A-17", "amount": 420}),
        ]
        journal = await events(api, run_id)
        scored = [e for e in journal if e.event == JournalEvent.CONFIDENCE_EVALUATED]
        assert [(e.step_id, e.data["decision"]) for e in scored] == [
            ("lookup", "execute"),
            ("refund", "divert"),
        ]
        assert scored[1].data["votes"].count(True) == 3
        assert scored[1].data["node_type"] == "connector"
        assert len(llm.requests) == 10  # scored once each, not again on resume


async def test_a_denial_fails_the_step(migrated_db_url, llm):
    llm.script(*UNANIMOUS, *SPLIT)
    gate = "gate: {enabled: true, channels: [web]}"
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, gate)) as api:
        run_id = await start(api)
        await wait_status(api.engine, run_id, RunStatus.WAITING)
        (request,) = await api.engine.store.list_takeovers(run_id=run_id)
        status, _ = await api.call(
            "POST",
            f"/v1/runs/{run_id}/takeover/{request.id}/deny",
            as_="carol",
            json={"notes": "wrong amount"},
        )
        assert status == 200
        await wait_status(api.engine, run_id, RunStatus.FAILED)
        journal = await events(api, run_id)
        failed = [e for e in journal if e.event == JournalEvent.STEP_FAILED]
        assert [e.step_id for e in failed] == ["refund"]
        assert "wrong amount" in failed[0].data["error"]
        assert [r["action"] for r in await api.engine.store.ledger(run_id=run_id)] == ["lookup"]


async def test_with_the_gate_off_the_same_step_runs_directly(migrated_db_url, llm):
    llm.script(*UNANIMOUS, *SPLIT)
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, "")) as api:
        run_id = await start(api)
        await wait_status(api.engine, run_id, RunStatus.COMPLETED)
        assert [r["action"] for r in await api.engine.store.ledger(run_id=run_id)] == [
            "lookup",
            "refund",
        ]
        journal = await events(api, run_id)
        assert JournalEvent.CONFIDENCE_EVALUATED not in [e.event for e in journal]
        assert llm.requests == []
        assert await api.engine.store.list_takeovers(run_id=run_id) == []


async def test_no_approval_channel_auto_approves(migrated_db_url, llm):
    llm.script(*UNANIMOUS, *SPLIT)
    gate = "gate: {enabled: true}"  # no gate.channels, and the step has none
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, gate)) as api:
        run_id = await start(api)
        await wait_status(api.engine, run_id, RunStatus.COMPLETED)
        journal = await events(api, run_id)
        (refund,) = [
            e
            for e in journal
            if e.event == JournalEvent.CONFIDENCE_EVALUATED and e.step_id == "refund"
        ]
        assert refund.data["score"] == 0.6 and refund.data["decision"] == "execute"
        assert "no approval channel" in refund.data["auto_approved"]


async def test_an_admin_switches_the_gate_on_at_runtime(migrated_db_url, llm):
    llm.default = Reply("NO")
    gate = "gate: {channels: [web]}"
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, gate)) as api:
        first = await start(api, order="A-1")
        await wait_status(api.engine, first, RunStatus.COMPLETED)
        status, body = await api.call("PATCH", "/v1/gate", as_="admin", json={"enabled": True})
        assert status == 200, body
        second = await start(api, order="A-2")
        await wait_status(api.engine, second, RunStatus.WAITING)
        (request,) = await api.engine.store.list_takeovers(run_id=second)
        assert request.step_id == "lookup" and request.details["confidence"]["score"] == 0.0


# -- the gate API ----------------------------------------------------------------------------


async def test_get_and_patch_the_gate(migrated_db_url, llm):
    gate = "gate: {threshold: 0.6, channels: [web]}"
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, gate)) as api:
        status, body = await api.call("GET", "/v1/gate", as_="agent")
        assert status == 200
        assert body["settings"]["threshold"] == {"value": 0.6, "source": "app.yaml"}
        assert body["settings"]["enabled"] == {"value": False, "source": "default"}
        assert body["channels"] == {"value": ["web"], "source": "app.yaml"}
        assert body["llmConfigured"] is True and body["overrides"] == []

        status, body = await api.call("PATCH", "/v1/gate", as_="bob", json={"enabled": True})
        assert status == 403
        status, body = await api.call("PATCH", "/v1/gate", as_="admin", json={"threshold": 1.5})
        assert status == 400 and body["field"] == "threshold" and "threshold" in body["message"]
        status, body = await api.call(
            "PATCH", "/v1/gate", as_="admin", json={"threshold": 0.9, "scope": "agent"}
        )
        assert status == 400 and body["field"] == "key"
        status, body = await api.call("PATCH", "/v1/gate", as_="admin", json={"colour": "red"})
        assert status == 400 and "colour" in body["message"]

        status, body = await api.call(
            "PATCH",
            "/v1/gate",
            as_="admin",
            json={"threshold": 0.9, "samples": 20, "scope": "node_type", "key": "connector"},
        )
        assert status == 200, body
        assert {(c["setting"], c["new"]) for c in body["changes"]} == {
            ("threshold", 0.9),
            ("samples", 5),
        }
        assert body["warnings"] == ["samples: 20 is outside 1..9; using 5"]
        status, body = await api.call("GET", "/v1/gate?nodeType=connector", as_="bob")
        assert body["settings"]["threshold"] == {
            "value": 0.9,
            "source": "override:node_type=connector",
        }
        (override, _) = sorted(body["overrides"], key=lambda o: o["setting"], reverse=True)
        assert override["updatedBy"] == "alice" and override["key"] == "connector"

        status, body = await api.call(
            "PATCH",
            "/v1/gate",
            as_="admin",
            json={"threshold": None, "scope": "node_type", "key": "connector"},
        )
        assert body["changes"] == [
            {
                "setting": "threshold",
                "scope": "node_type",
                "key": "connector",
                "old": 0.9,
                "new": None,
            }
        ]
        status, body = await api.call("GET", "/v1/gate?nodeType=connector", as_="bob")
        assert body["settings"]["threshold"]["source"] == "app.yaml"
        status, body = await api.call("GET", "/v1/gate?nodeType=approval", as_="bob")
        assert status == 400

        status, spec = await api.call("GET", "/openapi.json")
        assert {"get", "patch"} <= set(spec["paths"]["/v1/gate"])
        assert "post" in spec["paths"]["/v1/runs/{id}/feedback"]


async def test_feedback_api(migrated_db_url, llm):
    async with running_api(migrated_db_url, FLOW, extra=extra(llm, "")) as api:
        run_id = await start(api)
        await wait_status(api.engine, run_id, RunStatus.COMPLETED)
        path = f"/v1/runs/{run_id}/feedback"
        status, body = await api.call(
            "POST", path, as_="bob", json={"stepId": "refund", "score": 1, "comment": "wrong"}
        )
        assert status == 201, body
        assert body["by"] == "bob" and body["score"] == 1 and body["stepId"] == "refund"
        status, body = await api.call(
            "POST", path, as_="agent", json={"stepId": "refund", "score": 5}
        )
        assert status == 403 and "only people" in body["message"], body  # agents never rate
        journal = await events(api, run_id)
        assert [e.data["score"] for e in journal if e.event == JournalEvent.FEEDBACK_RECORDED] == [
            1
        ]
        status, body = await api.call(
            "POST", path, as_="bob", json={"stepId": "refund", "score": 6}
        )
        assert status == 400 and body["field"] == "score"
        status, body = await api.call("POST", path, as_="bob", json={"stepId": "x", "score": 3})
        assert status == 404
        status, body = await api.call(
            "POST", "/v1/runs/nope/feedback", as_="bob", json={"stepId": "refund", "score": 3}
        )
        assert status == 404
        status, body = await api.call("POST", path, json={"stepId": "refund", "score": 3})
        assert status == 401
