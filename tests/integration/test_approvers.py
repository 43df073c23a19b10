"""Who may decide: quorum, self-approval, approver lists and roles, over real HTTP. A refused
decision changes nothing: not the request, not its votes, not the run, not the journal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.support.api import Api, running_api
from tests.support.engines import wait_status

ACT = """
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
"""
FLOWS = (
    """
quorum:
  nodes:
    - {id: approve, type: approval, approvers: [bob, carol, dave], approvalsRequired: 2}
"""
    + ACT
    + """
listed:
  nodes:
    - {id: approve, type: approval, approvers: [bob, carol]}
"""
    + ACT
    + """
self-ok:
  nodes:
    - {id: approve, type: approval, approvers: [bob, carol], allowSelfApproval: true}
"""
    + ACT
    + """
anyone:
  nodes:
    - {id: approve, type: approval}
"""
    + ACT
)


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, FLOWS) as api:
        await api.token("bob-agent", Role.AGENT, "bob")  # an agent acting for bob
        yield api


async def parked(api: Api, workflow: str, as_: str = "agent") -> tuple[str, str]:
    status, run = await api.call(
        "POST", "/v1/runs", as_=as_, json={"workflow": workflow, "input": {"order": "o-1"}}
    )
    assert status == 201, run
    await wait_status(api.engine, run["id"], RunStatus.WAITING)
    (request,) = await api.engine.store.list_takeovers(run_id=run["id"])
    return run["id"], request.id


async def decide(
    api: Api, run_id: str, request_id: str, who: str, verb: str = "grant", **body: Any
) -> tuple[int, Any]:
    if verb == "grant":
        body.setdefault("release", True)
    return await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/{request_id}/{verb}", as_=who, json=body
    )


async def state(api: Api, run_id: str, request_id: str) -> tuple[Any, ...]:
    store = api.engine.store
    return (
        await store.get_run(run_id),
        await store.get_takeover(request_id),
        await store.journal(run_id),
    )


async def actions(api: Api, run_id: str) -> list[str]:
    return [row["action"] for row in await api.engine.store.ledger(run_id=run_id)]


async def test_quorum_two_of_three(api: Api) -> None:
    run_id, request_id = await parked(api, "quorum")
    status, body = await decide(api, run_id, request_id, "bob", notes="one")
    assert status == 200, body
    assert body["status"] == "pending"
    assert [v["person"] for v in body["approvals"]] == ["bob"]
    assert body["approvalsRequired"] == 2
    assert (await api.engine.store.get_run(run_id)).status == RunStatus.WAITING
    granted = [
        e
        for e in await api.engine.store.journal(run_id)
        if e.event == JournalEvent.TAKEOVER_GRANTED
    ]
    assert [(e.data["by"], e.data["final"], e.data["approvals"]) for e in granted] == [
        ("bob", False, 1)
    ]

    before = await state(api, run_id, request_id)
    status, body = await decide(api, run_id, request_id, "bob")
    assert status == 409 and body["error"] == "duplicate_vote", body
    assert await state(api, run_id, request_id) == before

    status, body = await decide(api, run_id, request_id, "carol")
    assert status == 200, body
    assert body["status"] == "released" and body["decidedBy"] == "carol"
    assert [v["person"] for v in body["approvals"]] == ["bob", "carol"]
    granted = [
        e
        for e in await api.engine.store.journal(run_id)
        if e.event == JournalEvent.TAKEOVER_GRANTED
    ]  # the refused duplicate counted nothing
    assert [(e.data["by"], e.data["final"], e.data["approvals"]) for e in granted] == [
        ("bob", False, 1),
        ("carol", True, 2),
    ]
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await actions(api, run_id) == ["refund"]

    status, body = await decide(api, run_id, request_id, "dave")
    assert status == 409 and body["error"] == "already_decided"


async def test_self_approval_is_refused(api: Api) -> None:
    run_id, request_id = await parked(api, "listed", as_="bob-agent")
    assert (await api.engine.store.get_run(run_id)).requested_by == "bob"
    before = await state(api, run_id, request_id)
    status, body = await decide(api, run_id, request_id, "bob")
    assert status == 403 and body["error"] == "forbidden", body
    assert "started this run" in body["message"]
    assert await state(api, run_id, request_id) == before
    # someone else on the list still can
    status, body = await decide(api, run_id, request_id, "carol")
    assert status == 200 and body["status"] == "released"
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED


async def test_allow_self_approval(api: Api) -> None:
    run_id, request_id = await parked(api, "self-ok", as_="bob-agent")
    status, body = await decide(api, run_id, request_id, "bob")
    assert status == 200 and body["status"] == "released", body
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED


async def test_non_approver_is_refused(api: Api) -> None:
    run_id, request_id = await parked(api, "listed")
    before = await state(api, run_id, request_id)
    for verb in ("grant", "deny"):
        status, body = await decide(api, run_id, request_id, "dave", verb)
        assert status == 403 and body["error"] == "forbidden", (verb, body)
        assert "not an approver" in body["message"]
    assert await state(api, run_id, request_id) == before
    assert before[1].status == TakeoverStatus.PENDING
    # Once decided, a non-approver is still told they may not decide, not who did.
    status, body = await decide(api, run_id, request_id, "carol")
    assert status == 200 and body["status"] == "released", body
    status, body = await decide(api, run_id, request_id, "dave")
    assert status == 403 and "not an approver" in body["message"], body


async def test_agent_token_cannot_decide(api: Api) -> None:
    run_id, request_id = await parked(api, "anyone")
    before = await state(api, run_id, request_id)
    for verb in ("grant", "deny", "release"):
        for who in ("agent", "bob-agent"):
            status, body = await decide(api, run_id, request_id, who, verb)
            assert status == 403 and body["error"] == "forbidden", (verb, who, body)
    assert await state(api, run_id, request_id) == before


async def test_a_node_naming_nobody_lets_a_project_approver_decide(api: Api) -> None:
    run_id, request_id = await parked(api, "anyone")
    status, body = await decide(api, run_id, request_id, "bob")
    assert status == 200 and body["status"] == "released", body
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED


async def test_a_node_naming_nobody_falls_back_to_the_project_approvers(api: Api) -> None:
    run_id, request_id = await parked(api, "anyone")  # the project's approvers: [finance]
    request = await api.engine.store.get_takeover(request_id)
    assert request.approvers == ("alice", "bob", "carol")
    before = await state(api, run_id, request_id)
    status, body = await decide(api, run_id, request_id, "dave")  # dave is not in finance
    assert status == 403 and body["error"] == "forbidden", body
    assert await state(api, run_id, request_id) == before


async def test_a_request_named_under_another_run_is_not_found(api: Api) -> None:
    """The REST path names the run and the request: a request of another run is 404 for every
    verb, and nothing changes on either run."""
    run_a, request_a = await parked(api, "listed")
    run_b, request_b = await parked(api, "listed")
    before = (await state(api, run_a, request_a), await state(api, run_b, request_b))
    for verb in ("grant", "deny", "release"):
        status, body = await decide(api, run_b, request_a, "carol", verb)
        assert status == 404 and body["error"] == "not_found", (verb, body)
    assert (await state(api, run_a, request_a), await state(api, run_b, request_b)) == before
    status, body = await decide(api, run_a, request_a, "carol")
    assert status == 200 and body["status"] == "released", body


# -- admin override (seed 003: an admin may force-advance any pending request) ---------------


async def test_an_admin_overrides_a_request_they_are_not_an_approver_of(api: Api) -> None:
    run_id, request_id = await parked(api, "listed")  # approvers: bob, carol; alice is admin
    status, body = await decide(api, run_id, request_id, "admin", notes="urgent")
    assert status == 200, body
    assert body["status"] == "released" and body["decidedBy"] == "alice"
    request = await api.engine.store.get_takeover(request_id)
    assert request.details["override"] == {"by": "alice", "override": "admin"}
    granted = [
        e
        for e in await api.engine.store.journal(run_id)
        if e.event == JournalEvent.TAKEOVER_GRANTED
    ]
    assert [(e.data["by"], e.data["override"], e.data["final"]) for e in granted] == [
        ("alice", "admin", True)
    ]
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await actions(api, run_id) == ["refund"]


async def test_an_admin_override_decides_a_quorum_at_once(api: Api) -> None:
    run_id, request_id = await parked(api, "quorum")  # two of bob, carol, dave
    status, body = await decide(api, run_id, request_id, "bob")
    assert status == 200 and body["status"] == "pending", body
    status, body = await decide(api, run_id, request_id, "admin")
    assert status == 200 and body["status"] == "released", body
    assert body["decidedBy"] == "alice"
    assert await wait_status(api.engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED


async def test_an_admin_override_denies(api: Api) -> None:
    run_id, request_id = await parked(api, "listed")
    status, body = await decide(api, run_id, request_id, "admin", "deny", notes="no")
    assert status == 200 and body["status"] == "denied", body
    denied = [
        e for e in await api.engine.store.journal(run_id) if e.event == JournalEvent.TAKEOVER_DENIED
    ]
    assert [(e.data["by"], e.data["override"]) for e in denied] == [("alice", "admin")]
    assert await wait_status(api.engine, run_id, RunStatus.FAILED) == RunStatus.FAILED


async def test_an_approver_deciding_is_no_override(api: Api) -> None:
    run_id, request_id = await parked(api, "listed")
    status, body = await decide(api, run_id, request_id, "carol")
    assert status == 200, body
    request = await api.engine.store.get_takeover(request_id)
    assert "override" not in request.details
    (granted,) = [
        e
        for e in await api.engine.store.journal(run_id)
        if e.event == JournalEvent.TAKEOVER_GRANTED
    ]
    assert "override" not in granted.data


async def test_an_admin_still_cannot_decide_their_own_run(api: Api) -> None:
    run_id, request_id = await parked(api, "listed", as_="admin")  # alice started it
    before = await state(api, run_id, request_id)
    status, body = await decide(api, run_id, request_id, "admin")
    assert status == 403 and "started this run" in body["message"], body
    assert await state(api, run_id, request_id) == before
