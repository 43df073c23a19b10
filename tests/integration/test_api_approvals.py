"""``GET /v1/approvals``: the approval queue across runs over real HTTP, on SQLite and
PostgreSQL: approval nodes and held calls alike, every filter, keyed pages, bad queries; and the
console's queue page reading the same pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from engine.domain.model import Principal, Role, TakeoverStatus
from engine.domain.records import Adopt, NewRun
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, person
from tests.support.web import DEMO_LEDGER, page, pending_request, sign_in

FLOWS = """
pay:
  nodes:
    - {id: approve, type: approval, reason: "Pay {{ input.order }}", approvers: [carol],
       channels: [web, "slack:C0PAY"]}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
free:
  nodes:
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {}}
"""
EXTRA = (
    DEMO_LEDGER
    + """
policies:
  - {name: refunds, decision: ask, connector: demo-ledger, action: refund,
     approvers: [bob], channels: ["slack:C0FINANCE"]}
"""
)


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, FLOWS, extra=EXTRA, clock=ManualClock()) as api:
        yield api


async def _queue(api: Api) -> dict[str, str]:
    """Requests of each shape, a minute apart: an approval node (carol), a manual takeover
    naming nobody (the project's approvers), a held call (bob), the approval node again;
    their ids by name."""
    clock = api.engine.clock
    assert isinstance(clock, ManualClock)
    ids: dict[str, str] = {}
    run, _ = await api.engine.runs.start_run("pay", {"order": "pay-1"}, AGENT)
    ids["pay-1"] = (await pending_request(api.engine, run.id)).id
    clock.advance(minutes=1)
    # A run another worker holds, taken over by an admin who names no approvers: its workflow
    # names no deciders, so the project's approvers decide (engine.approvers.run_deciders).
    held = Adopt("other-worker", clock.now() + timedelta(minutes=30))
    await api.engine.store.create_run(
        NewRun(id="r-open", workflow="free", input={"order": "open"}, adopt=held), clock.now()
    )
    admin = person("alice", Role.ADMIN)
    ids["open"] = (await api.engine.approvals.request("r-open", admin, reason="Anyone open")).id
    clock.advance(minutes=1)
    status, held = await api.call(
        "POST",
        "/v1/calls",
        as_="agent",
        json={"connector": "demo-ledger", "action": "refund", "args": {"order": "c", "amount": 3}},
    )
    assert status == 202, held
    ids["call"] = held["requestId"]
    clock.advance(minutes=1)
    run, _ = await api.engine.runs.start_run("pay", {"order": "pay-2"}, AGENT)
    ids["pay-2"] = (await pending_request(api.engine, run.id)).id
    return ids


async def _ids(api: Api, query: str = "", as_: str = "bob") -> list[str]:
    status, body = await api.call("GET", f"/v1/approvals{query}", as_=as_)
    assert status == 200, body
    assert body["nextCursor"] is None
    return [a["id"] for a in body["approvals"]]


async def test_the_queue_across_runs_with_every_filter(api: Api) -> None:
    ids = await _queue(api)
    everything = [ids["pay-1"], ids["open"], ids["call"], ids["pay-2"]]
    assert await _ids(api) == everything  # oldest first

    status, body = await api.call("GET", "/v1/approvals", as_="bob")
    first = body["approvals"][0]
    assert first["workflow"] == "pay" and first["runStatus"] == "waiting"
    assert body["approvals"][1]["approvers"] == ["alice", "bob", "carol"]  # the project's
    assert first["approvalUrl"] == f"http://signoff.test/approvals/{ids['pay-1']}"
    assert first["approvers"] == ["carol"] and first["status"] == "pending"
    call = body["approvals"][2]
    assert (call["kind"], call["workflow"]) == ("policy", "call:demo-ledger.refund")
    assert call["details"]["summary"] == "Refund 3 EUR for order c"

    assert await _ids(api, "?approver=carol") == [ids["pay-1"], ids["open"], ids["pay-2"]]
    assert await _ids(api, "?approver=me") == [ids["open"], ids["call"]]  # bob
    assert await _ids(api, "?approver=dave") == []
    assert await _ids(api, "?workflow=pay") == [ids["pay-1"], ids["pay-2"]]
    assert await _ids(api, "?workflow=free") == [ids["open"]]
    assert await _ids(api, "?workflow=call:demo-ledger.refund") == [ids["call"]]
    # An approval node's connector is that of the step it approves (pay's act).
    assert await _ids(api, "?connector=demo-ledger") == [ids["pay-1"], ids["call"], ids["pay-2"]]
    assert await _ids(api, "?connector=mailer") == []
    assert await _ids(api, "?channel=slack:C0PAY") == [ids["pay-1"], ids["pay-2"]]
    assert await _ids(api, "?channel=slack:C0FINANCE") == [ids["call"]]
    assert await _ids(api, "?kind=policy") == [ids["call"]]
    assert await _ids(api, "?kind=node&approver=carol&channel=web&workflow=pay") == [
        ids["pay-1"],
        ids["pay-2"],
    ]
    assert await _ids(api, "?workflow=nope") == []
    assert await _ids(api, "?status=released") == []

    status, _ = await api.call(
        "POST", f"/v1/runs/x/takeover/{ids['open']}/deny", as_="bob", json={}
    )
    assert status == 404
    run_id = (await api.engine.store.get_takeover(ids["open"])).run_id
    status, body = await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/{ids['open']}/deny", as_="bob", json={"notes": "no"}
    )
    assert status == 200, body
    assert await _ids(api, "?approver=bob") == [ids["call"]]
    assert await _ids(api, "?status=denied") == [ids["open"]]


async def test_pages_are_keyed_and_bounded(api: Api) -> None:
    ids = await _queue(api)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        status, body = await api.call("GET", f"/v1/approvals{query}", as_="bob")
        assert status == 200, body
        pages += 1
        seen += [a["id"] for a in body["approvals"]]
        cursor = body["nextCursor"]
        if cursor is None:
            break
        if pages == 1:
            # Deciding a request already seen does not shift the next page.
            request = await api.engine.store.get_takeover(ids["pay-1"])
            await api.engine.approvals.deny(request.id, _carol(), notes="no")
    assert pages == 2
    assert seen == [ids["pay-1"], ids["open"], ids["call"], ids["pay-2"]]

    status, body = await api.call("GET", "/v1/approvals?limit=1&approver=carol", as_="bob")
    assert [a["id"] for a in body["approvals"]] == [ids["open"]]  # pay-1 was denied
    status, more = await api.call(
        "GET", f"/v1/approvals?limit=1&approver=carol&cursor={body['nextCursor']}", as_="bob"
    )
    assert [a["id"] for a in more["approvals"]] == [ids["pay-2"]] and more["nextCursor"] is None


def _carol() -> Principal:
    return person("carol")


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("?limit=0", "query.limit: must be 1..200"),
        ("?limit=201", "query.limit: must be 1..200"),
        ("?limit=x", "query.limit: must be a whole number"),
        ("?status=waiting", "query.status: must be one of pending"),
        ("?kind=other", "query.kind: must be one of"),
        ("?cursor=bm9wZQ", "cursor: not a cursor this queue gave"),
        ("?cursor=%%%", "cursor: not a cursor this queue gave"),
        ("?workflow=", "query.workflow: must be 1..200 characters"),
        ("?approver=a&approver=b", "query.approver: give it once"),
        ("?aprover=bob", "query.aprover: unknown parameter"),
        ("?approver=a%00b", "query.approver holds a NUL character"),
        ("?approver=me&limit=1", None),
    ],
)
async def test_bad_queries_are_refused(api: Api, query: str, says: str | None) -> None:
    status, body = await api.call("GET", f"/v1/approvals{query}", as_="bob")
    if says is None:  # the control: a good query of the same shape
        assert status == 200, body
        return
    assert status == 400, body
    assert body["error"] == "invalid_request" and body["message"].startswith(says), body


async def test_who_may_read_the_queue(api: Api) -> None:
    status, body = await api.call("GET", "/v1/approvals", as_="agent")
    assert status == 403, body
    status, body = await api.call("GET", "/v1/approvals")
    assert status == 401, body
    status, body = await api.call("GET", "/v1/approvals?approver=me", as_="admin")
    assert status == 200, body  # the admin token is alice's


async def test_the_openapi_document_declares_the_queue(api: Api) -> None:
    status, doc = await api.call("GET", "/openapi.json")
    assert status == 200
    op = doc["paths"]["/v1/approvals"]["get"]
    names = {p["name"] for p in op["parameters"]}
    assert names == {
        "status",
        "approver",
        "workflow",
        "connector",
        "channel",
        "kind",
        "limit",
        "cursor",
    }
    limit = next(p for p in op["parameters"] if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 200
    result = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert result["properties"]["approvals"]["items"] == {"$ref": "#/components/schemas/Approval"}
    assert "runStatus" in doc["components"]["schemas"]["Approval"]["properties"]


async def test_the_console_queue_reads_the_same_pages(api: Api) -> None:
    ids = await _queue(api)
    await sign_in(api.client, api.tokens["admin"])
    _, html = await page(api.client, "/console?show=all&approver=carol")
    assert html.index("Pay pay-1") < html.index("Anyone open") < html.index("Pay pay-2")
    assert "Refund 3 EUR" not in html
    pending = await api.engine.store.list_takeovers(statuses=[TakeoverStatus.PENDING])
    assert {r.id for r in pending} == set(ids.values())

    # The API's cursor opens the same page in the console (showing everything waiting).
    status, body = await api.call("GET", "/v1/approvals?limit=2", as_="bob")
    _, later = await page(api.client, f"/console?show=all&cursor={body['nextCursor']}")
    assert "Pay pay-1" not in later and "Anyone open" not in later
    assert "Refund 3 EUR" in later and "Pay pay-2" in later
    assert "Older requests" not in later  # the last page
    status, _ = await page(api.client, "/console?cursor=nope")
    assert status == 400
