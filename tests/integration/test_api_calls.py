"""Held calls over real HTTP: allow, ask, block, binding reuse, expiry, deciders, approve_only."""

from __future__ import annotations

import pytest

from engine.domain.model import Role, RunStatus, TakeoverKind
from tests.support.api import running_api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status
from tests.support.waiting import quiet

FLOW = """
noop:
  nodes:
    - {id: look, type: connector, connector: demo-ledger, action: lookup, args: {order: x}}
"""

CALLS = """
approvals: {ttl: 2h}
connectors:
  demo-ledger:
    type: demo-ledger
    actions:
      lookup: {kind: read}
      refund: {kind: write, summary: "Refund {{ args.amount }} EUR for order {{ args.order }}"}
      note: {kind: write}
      purge: {kind: destructive}
policies:
  - {name: no-purge, decision: block, connector: demo-ledger, action: "purge*"}
  - {name: refunds, decision: ask, connector: demo-ledger, action: refund,
     approvers: [finance], channels: ["slack:C0FINANCE"]}
  - {name: notes, decision: ask, connector: demo-ledger, action: note}
"""

REFUND = {"connector": "demo-ledger", "action": "refund", "args": {"order": "o-1", "amount": 12}}


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def api(migrated_db_url, clock):
    async with running_api(migrated_db_url, FLOW, extra=CALLS, clock=clock) as api:
        yield api


async def _cards(api) -> int:
    messages = await api.engine.store.outbox_messages()
    return sum(1 for record, _, _ in messages if record.kind == "card")


async def _policy_requests(api) -> list:
    return [r for r in await api.engine.store.list_takeovers() if r.kind == TakeoverKind.POLICY]


async def _approve(api, body, as_="bob"):
    run_id, request_id = body["executionId"], body["requestId"]
    status, decided = await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/{request_id}/grant", as_=as_, json={"release": True}
    )
    return status, decided


async def _final(api, execution_id, as_="agent"):
    async def check():
        status, body = await api.call("GET", f"/v1/calls/{execution_id}?wait=5", as_=as_)
        assert status == 200, body
        return body if body["status"] not in ("pending_approval", "running") else None

    return await wait_for(check, timeout=20)


async def test_allowed_call_runs_and_answers_with_the_result(api):
    status, body = await api.call(
        "POST",
        "/v1/calls",
        as_="agent",
        json={"connector": "demo-ledger", "action": "lookup", "args": {"order": "o-9"}},
    )
    assert status == 200, body
    assert body["status"] == "executed" and body["result"]["order"] == "o-9"
    journal = await api.engine.store.journal(body["executionId"])
    evaluated = next(e for e in journal if e.event == "policy_evaluated")
    assert evaluated.step_id == "call"
    assert evaluated.data["decision"] == "allow" and evaluated.data["rule"] == "policy.defaultMode"
    ledger = await api.engine.store.ledger(run_id=body["executionId"])
    assert [r["idempotency_key"] for r in ledger] == [f"{body['executionId']}:call:1"]


async def test_failed_call_answers_502(api):
    status, body = await api.call(
        "POST", "/v1/calls", as_="agent", json={"connector": "demo-ledger", "action": "lookup"}
    )
    assert status == 502, body
    assert body["status"] == "failed" and body["error"] == "call_failed"
    assert "lookup needs an order" in body["message"]


async def test_blocked_call_stores_nothing(api):
    status, body = await api.call(
        "POST",
        "/v1/calls",
        as_="agent",
        json={"connector": "demo-ledger", "action": "purge", "args": {"all": True}},
    )
    assert status == 403, body
    assert body == {
        "status": "blocked",
        "error": "blocked",
        "message": "rule no-purge says block",
        "rule": "no-purge",
    }
    assert await api.engine.store.list_runs() == []


async def test_held_call_parks_until_approved(api, clock):
    status, body = await api.call("POST", "/v1/calls", as_="agent", json=REFUND)
    assert status == 202, body
    assert body["status"] == "pending_approval"
    assert body["approvalSummary"] == "Refund 12 EUR for order o-1"
    assert body["approvalUrl"] == f"http://signoff.test/approvals/{body['requestId']}"
    assert body["expiresAt"] == "2026-01-01T14:00:00Z"  # approvals.ttl: 2h
    run = await api.engine.store.get_run(body["executionId"])
    assert run.status == RunStatus.WAITING
    assert await api.engine.store.ledger(run_id=run.id) == []  # nothing has run
    (request,) = await _policy_requests(api)
    assert request.approvers == ("alice", "bob", "carol")  # the rule's group, expanded
    assert request.channels == ("slack:C0FINANCE",)
    assert request.details["args"] == REFUND["args"] and request.requested_by == "token:agent"
    assert await _cards(api) == 1

    status, decided = await _approve(api, body)
    assert status == 200 and decided["status"] == "released", decided
    final = await _final(api, body["executionId"])
    assert final["status"] == "executed" and final["result"]["recorded"] is True
    assert final["decidedBy"] == "bob"
    ledger = await api.engine.store.ledger(run_id=body["executionId"])
    assert ledger[0]["args"] == REFUND["args"]


async def test_binding_reuse_window_and_expiry(api, clock):
    _, first = await api.call("POST", "/v1/calls", as_="agent", json=REFUND)
    await _approve(api, first)
    assert (await _final(api, first["executionId"]))["status"] == "executed"
    assert (len(await _policy_requests(api)), await _cards(api)) == (1, 1)

    clock.advance(minutes=10)  # identical call within 15 minutes: no new decision
    status, again = await api.call("POST", "/v1/calls", as_="agent", json=REFUND)
    assert status == 200 and again["status"] == "executed", again
    assert again["executionId"] != first["executionId"]
    assert (len(await _policy_requests(api)), await _cards(api)) == (1, 1)
    journal = await api.engine.store.journal(again["executionId"])
    evaluated = next(e for e in journal if e.event == "policy_evaluated")
    assert evaluated.data["reusedApproval"] == first["requestId"]

    changed = {**REFUND, "args": {"order": "o-1", "amount": 13}}  # one argument changed
    status, other = await api.call("POST", "/v1/calls", as_="agent", json=changed)
    assert status == 202 and other["status"] == "pending_approval"
    assert (len(await _policy_requests(api)), await _cards(api)) == (2, 2)

    clock.advance(minutes=5, seconds=1)  # 15 min 1 s after the approval: a new decision
    status, late = await api.call("POST", "/v1/calls", as_="agent", json=REFUND)
    assert status == 202 and late["status"] == "pending_approval"
    assert (len(await _policy_requests(api)), await _cards(api)) == (3, 3)

    clock.advance(hours=2)  # past approvals.ttl: the undecided calls expired
    for held in (other, late):
        status, body = await api.call("GET", f"/v1/calls/{held['executionId']}", as_="agent")
        assert status == 200 and body["status"] == "expired", body
    # The sweeper marks them and the worker fails the runs; the answer stays "expired".
    await wait_status(api.engine, late["executionId"], RunStatus.FAILED)
    status, body = await api.call("GET", f"/v1/calls/{late['executionId']}", as_="bob")
    assert body["status"] == "expired" and "nobody decided" in body["reason"]


async def test_denial_reason_reaches_the_agent(api):
    _, body = await api.call("POST", "/v1/calls", as_="agent", json=REFUND)
    status, denied = await api.call(
        "POST",
        f"/v1/runs/{body['executionId']}/takeover/{body['requestId']}/deny",
        as_="carol",
        json={"notes": "not this order"},
    )
    assert status == 200 and denied["status"] == "denied"
    final = await _final(api, body["executionId"])
    assert final == {
        "executionId": body["executionId"],
        "status": "denied",
        "reason": "not this order",
        "decidedBy": "carol",
        "requestId": body["requestId"],
        "approvalUrl": body["approvalUrl"],
        "approvalSummary": body["approvalSummary"],
        "expiresAt": body["expiresAt"],
    }
    await wait_status(api.engine, body["executionId"], RunStatus.FAILED)
    assert await api.engine.store.ledger(run_id=body["executionId"]) == []


async def test_the_person_of_the_agents_token_is_told_the_outcome(api):
    """An agent's token tied to dave: dave is told in the card's channel how the call ended
    (``engine.domain.notify``); GET /v1/calls says the same to the agent."""
    await api.token("dave-agent", Role.AGENT, "dave")
    _, body = await api.call("POST", "/v1/calls", as_="dave-agent", json=REFUND)
    (request,) = await _policy_requests(api)
    assert request.requested_by == "dave"
    assert request.details["requester"] == {"person": "dave", "channels": ["slack:C0FINANCE"]}
    status, _ = await api.call(
        "POST",
        f"/v1/runs/{body['executionId']}/takeover/{body['requestId']}/deny",
        as_="carol",
        json={"notes": "not this order"},
    )
    assert status == 200
    final = await _final(api, body["executionId"], as_="dave-agent")
    assert (final["status"], final["reason"], final["decidedBy"]) == (
        "denied",
        "not this order",
        "carol",
    )
    rows = await api.engine.store.outbox_messages(run_id=body["executionId"])
    notices = [record.payload for record, _, _ in rows if record.kind == "notice"]
    assert notices == [
        {
            "notice": "decision",
            "requestId": body["requestId"],
            "status": "denied",
            "votes": 0,
            "requester": "dave",
        }
    ]


async def test_deciders_exclude_the_caller_and_its_session(api):
    # The agent acts for bob: bob may not approve its call, another finance member may.
    _, body = await api.call("POST", "/v1/calls", as_="agent", json={**REFUND, "session": "bob"})
    status, refused = await _approve(api, body, as_="bob")
    assert status == 403, refused
    status, refused = await _approve(api, body, as_="dave")  # not in the rule's group
    assert status == 403 and "not an approver" in refused["message"]
    status, _ = await _approve(api, body, as_="carol")
    assert status == 200

    # A rule without approvers falls back to the project's (finance); alice calls as admin and
    # so cannot approve her own call; a session given as a Slack id is recognised too.
    note = {"connector": "demo-ledger", "action": "note", "args": {"text": "hi"}}
    as_bob = {**note, "session": "U0BOB0001"}
    _, body = await api.call("POST", "/v1/calls", as_="admin", json=as_bob)
    (request,) = [r for r in await _policy_requests(api) if r.run_id == body["executionId"]]
    assert request.approvers == ("alice", "carol") and request.requested_by == "alice"
    status, refused = await _approve(api, body, as_="admin")
    assert status == 403 and "you started this run" in refused["message"]
    status, _ = await _approve(api, body, as_="carol")
    assert status == 200


async def test_a_held_call_asks_a_delegate_but_never_the_person_its_agent_acts_for(api):
    # alice is away for dave, carol for bob; the agent acts for bob, who is no decider of its
    # call, so carol's delegation adds nobody and alice's adds dave.
    for person, delegate in (("alice", "dave"), ("carol", "bob")):
        away = {"until": "2026-01-08", "delegate": delegate}
        status, set_ = await api.call("PUT", f"/v1/people/{person}/away", as_="admin", json=away)
        assert status == 200, set_
    _, body = await api.call("POST", "/v1/calls", as_="agent", json={**REFUND, "session": "bob"})
    (request,) = [r for r in await _policy_requests(api) if r.run_id == body["executionId"]]
    assert request.approvers == ("alice", "carol", "dave")
    assert [(d["for"], d["delegate"]) for d in request.details["delegates"]] == [("alice", "dave")]
    status, refused = await _approve(api, body, as_="bob")
    assert status == 403, refused
    status, decided = await _approve(api, body, as_="dave")
    assert status == 200, decided


async def test_only_session_could_approve_is_refused(migrated_db_url, clock):
    extra = CALLS + "  - {name: solo, decision: ask, connector: demo-ledger, action: lookup,\n"
    extra += "     approvers: [dave]}\n"
    async with running_api(migrated_db_url, FLOW, extra=extra, clock=clock) as api:
        body = {"connector": "demo-ledger", "action": "lookup", "args": {"order": "o"}}
        status, answer = await api.call(
            "POST", "/v1/calls", as_="agent", json={**body, "session": "dave"}
        )
        assert status == 403 and answer["error"] == "forbidden", answer
        assert await api.engine.store.list_runs() == []


async def test_approve_only_records_the_approval_and_calls_nothing(api):
    status, body = await api.call(
        "POST", "/v1/calls", as_="agent", json={**REFUND, "mode": "approve_only"}
    )
    assert status == 202
    await _approve(api, body)
    final = await _final(api, body["executionId"])
    assert final["status"] == "approved" and final["result"] is None
    await wait_status(api.engine, body["executionId"], RunStatus.COMPLETED)
    assert await api.engine.store.ledger(run_id=body["executionId"]) == []


async def test_bad_requests(api):
    cases = [
        ({"connector": "nope", "action": "x"}, 404),
        ({"connector": "demo-ledger", "action": "nope"}, 404),
        ({**REFUND, "callbackUrl": "ftp://example.com/x"}, 400),
        ({**REFUND, "callbackUrl": "http://user:pw@example.com/x"}, 400),
        ({**REFUND, "mode": "later"}, 400),
        ({"connector": "demo-ledger"}, 400),
    ]
    for body, expected in cases:
        status, answer = await api.call("POST", "/v1/calls", as_="agent", json=body)
        assert status == expected, (body, answer)
    status, _ = await api.call("POST", "/v1/calls", as_="bob", json=REFUND)
    assert status == 403  # approvers do not make calls
    status, _ = await api.call("GET", "/v1/calls/nope", as_="agent")
    assert status == 404
    status, answer = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": "call:demo-ledger.purge", "input": {}}
    )
    assert status == 400 and "POST /v1/calls" in answer["message"]  # no way around the policy
    _, run = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "noop"})
    status, _ = await api.call("GET", f"/v1/calls/{run['id']}", as_="agent")
    assert status == 404  # an ordinary run is not a call


async def test_idempotency_key_returns_the_same_call(api):
    body = {**REFUND, "idempotencyKey": "k-1"}
    _, first = await api.call("POST", "/v1/calls", as_="agent", json=body)
    status, second = await api.call("POST", "/v1/calls", as_="agent", json=body)
    assert status == 202 and second["executionId"] == first["executionId"]
    assert len(await _policy_requests(api)) == 1


async def test_long_poll_returns_when_the_status_changes(api):
    import asyncio

    _, body = await api.call("POST", "/v1/calls", as_="agent", json=REFUND)
    poll = asyncio.create_task(
        api.call("GET", f"/v1/calls/{body['executionId']}?wait=30", as_="agent")
    )
    await quiet(0.3)
    assert not poll.done()
    await _approve(api, body)
    status, answer = await asyncio.wait_for(poll, 10)
    assert status == 200 and answer["status"] in ("running", "executed")


async def test_openapi_documents_calls(api):
    status, doc = await api.call("GET", "/openapi.json")
    assert status == 200
    post = doc["paths"]["/v1/calls"]["post"]
    assert {"200", "202", "403", "502"} <= set(post["responses"])
    assert "approve_only" in str(post["requestBody"])
    assert "wait" in str(doc["paths"]["/v1/calls/{executionId}"]["get"]["parameters"])
