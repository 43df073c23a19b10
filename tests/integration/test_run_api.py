"""The run API over real HTTP: idempotent starts, listing, the journal, cancelling, and the
takeover paths (manual request, grant, answer, release)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.support.api import Api, running_api
from tests.support.engines import wait_for, wait_status

FLOWS = """
pay:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: approve, type: approval, reason: "Pay {{ input.order }}", channels: [web]}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
straight:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
block:
  nodes:
    - {id: hold, type: connector, connector: slow, action: wait, args: {n: "{{ input.n }}"}}
"""
WORKERS = 8  # server.workers in tests.support.api


@dataclass
class Gate:
    """A remote service that holds every request until opened: blocked runs keep every worker
    slot busy, so a new run stays queued."""

    held: int = 0
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait(self, request: web.Request) -> web.Response:
        self.held += 1
        await self.opened.wait()
        return web.json_response({"done": True})


@pytest.fixture
async def gate() -> AsyncIterator[tuple[Gate, str]]:
    fake = Gate()
    app = web.Application()
    app.router.add_post("/wait", fake.wait)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield fake, f"http://127.0.0.1:{port}"
    finally:
        fake.opened.set()
        await runner.cleanup()


@pytest.fixture
async def api(migrated_db_url: str, gate: tuple[Gate, str]) -> AsyncIterator[Api]:
    extra = f"""
    connectors:
      slow:
        type: http
        baseUrl: {gate[1]}
        timeoutSeconds: 60
        actions:
          wait: {{kind: write, method: POST, path: /wait}}
    """
    async with running_api(migrated_db_url, FLOWS, extra=extra) as api:
        yield api


async def start(api: Api, workflow: str = "pay", **body: Any) -> tuple[int, Any]:
    return await api.call(
        "POST",
        "/v1/runs",
        as_="agent",
        json={"workflow": workflow, "input": body.pop("input", {"order": "o-1"}), **body},
    )


async def parked(api: Api) -> tuple[str, str]:
    status, run = await start(api)
    assert status == 201, run
    await wait_status(api.engine, run["id"], RunStatus.WAITING)
    (request,) = await api.engine.store.list_takeovers(run_id=run["id"])
    return run["id"], request.id


async def test_idempotency_key_returns_the_same_run(api: Api) -> None:
    status, first = await start(api, idempotencyKey="order-1")
    assert status == 201 and first["idempotencyKey"] == "order-1"
    status, again = await start(api, idempotencyKey="order-1", input={"order": "other"})
    assert status == 200
    assert again["id"] == first["id"] and again["input"] == {"order": "o-1"}
    status, other = await start(api, idempotencyKey="order-2")
    assert status == 201 and other["id"] != first["id"]

    results = await asyncio.gather(*(start(api, idempotencyKey="burst") for _ in range(10)))
    assert sorted(status for status, _ in results) == [200] * 9 + [201]
    assert len({run["id"] for _, run in results}) == 1
    runs = await api.engine.store.list_runs(limit=1000)
    assert len(runs) == 3


async def test_list_runs_by_status_and_workflow(api: Api) -> None:
    waiting_id, _ = await parked(api)
    status, done = await start(api, "straight")
    assert status == 201
    await wait_status(api.engine, done["id"], RunStatus.COMPLETED)

    status, body = await api.call("GET", "/v1/runs?status=waiting", as_="bob")
    assert status == 200 and [r["id"] for r in body["runs"]] == [waiting_id]
    status, body = await api.call("GET", "/v1/runs?status=completed", as_="agent")
    assert [r["id"] for r in body["runs"]] == [done["id"]]
    assert body["runs"][0]["output"]["action"] == "refund"
    status, body = await api.call("GET", "/v1/runs?status=failed", as_="agent")
    assert body["runs"] == []
    status, body = await api.call("GET", "/v1/runs?workflow=straight", as_="agent")
    assert [r["id"] for r in body["runs"]] == [done["id"]]
    status, body = await api.call("GET", "/v1/runs", as_="agent")
    assert {r["id"] for r in body["runs"]} == {waiting_id, done["id"]}
    status, body = await api.call("GET", "/v1/runs?status=sleeping", as_="agent")
    assert status == 400 and body["error"] == "invalid_request"
    status, body = await api.call("GET", "/v1/runs?limit=0", as_="agent")
    assert status == 400


async def test_journal_endpoint(api: Api) -> None:
    run_id, request_id = await parked(api)
    status, body = await api.call("GET", f"/v1/runs/{run_id}/journal", as_="agent")
    assert status == 200 and body["runId"] == run_id
    events = body["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [(e["event"], e["stepId"]) for e in events] == [
        ("run_started", None),
        ("step_started", "prepare"),
        ("step_completed", "prepare"),
        ("step_started", "approve"),
        ("takeover_requested", "approve"),
        ("run_waiting", "approve"),
    ]
    assert events[4]["data"]["requestId"] == request_id
    assert events[0]["at"].endswith("Z")
    status, body = await api.call("GET", "/v1/runs/nope/journal", as_="agent")
    assert status == 404 and body["error"] == "not_found"


async def test_cancel(api: Api) -> None:
    run_id, request_id = await parked(api)
    for who in ("bob", "agent"):
        status, body = await api.call("POST", f"/v1/runs/{run_id}/cancel", as_=who)
        assert status == 403, (who, body)
    assert (await api.engine.store.get_run(run_id)).status == RunStatus.WAITING

    status, body = await api.call("POST", f"/v1/runs/{run_id}/cancel", as_="admin")
    assert status == 200 and body["status"] == "cancelled", body
    request = await api.engine.store.get_takeover(request_id)
    assert request.status == TakeoverStatus.CANCELLED and request.decided_by == "alice"
    status, journal = await api.call("GET", f"/v1/runs/{run_id}/journal", as_="agent")
    assert [e["event"] for e in journal["events"]][-2:] == ["takeover_cancelled", "run_cancelled"]

    status, body = await api.call("POST", f"/v1/runs/{run_id}/cancel", as_="admin")
    assert status == 409, body
    assert body["error"] == "invalid_transition" and body["status"] == "cancelled"
    status, body = await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/{request_id}/grant", as_="bob", json={}
    )
    assert status == 409 and body["error"] == "already_decided" and body["status"] == "cancelled"
    status, body = await api.call("POST", "/v1/runs/nope/cancel", as_="admin")
    assert status == 404


async def test_manual_takeover_of_a_queued_run(api: Api, gate: tuple[Gate, str]) -> None:
    fake, _ = gate
    blockers = [(await start(api, "block", input={"n": i}))[1]["id"] for i in range(WORKERS)]

    async def all_held() -> bool:
        return fake.held == WORKERS

    await wait_for(all_held)
    status, run = await start(api, "straight")
    assert status == 201
    run_id = run["id"]
    status, tk = await api.call(
        "POST",
        f"/v1/runs/{run_id}/takeover/request",
        as_="bob",
        json={"reason": "let me do the refund", "stepId": "act"},
    )
    assert status == 201, tk
    assert (tk["kind"], tk["status"], tk["stepId"]) == ("manual", "pending", "act")
    assert (await api.engine.store.get_run(run_id)).status == RunStatus.QUEUED
    status, body = await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/request", as_="carol", json={"reason": "me too"}
    )
    assert status == 409, body  # one open request at a time

    fake.opened.set()  # the workers free up and take the run: it parks before act
    for blocker in blockers:
        await wait_status(api.engine, blocker, RunStatus.COMPLETED)
    await wait_status(api.engine, run_id, RunStatus.WAITING)
    ledger = await api.engine.store.ledger(run_id=run_id)
    assert [row["step_id"] for row in ledger] == ["prepare"]

    base = f"/v1/runs/{run_id}/takeover/{tk['id']}"
    status, body = await api.call("POST", base + "/answer", as_="bob", json={"sdpAnswer": "a"})
    assert status == 409, body  # an answer needs a granted request
    status, body = await api.call("POST", base + "/grant", as_="bob", json={"sdpOffer": "offer"})
    assert status == 200 and body["status"] == "granted" and body["sdpOffer"] == "offer"
    assert (await api.engine.store.get_run(run_id)).status == RunStatus.WAITING
    status, body = await api.call(
        "POST", base + "/answer", as_="bob", json={"sdpAnswer": "v=0 answer"}
    )
    assert status == 200 and body["sdpAnswer"] == "v=0 answer", body
    status, listing = await api.call("GET", f"/v1/runs/{run_id}/takeover", as_="agent")
    assert [r["sdpAnswer"] for r in listing["requests"]] == ["v=0 answer"]

    status, body = await api.call("POST", base + "/release", as_="bob")
    assert status == 200 and body["status"] == "released" and body["releasedBy"] == "bob"
    await wait_status(api.engine, run_id, RunStatus.COMPLETED)
    ledger = await api.engine.store.ledger(run_id=run_id)
    assert [row["step_id"] for row in ledger] == ["prepare", "act"]
    events = [e.event for e in await api.engine.store.journal(run_id)]
    assert events.count(JournalEvent.TAKEOVER_RELEASED) == 1
    status, body = await api.call("POST", base + "/release", as_="bob")
    assert status == 409


async def test_takeover_request_needs_a_queued_or_running_run(api: Api) -> None:
    run_id, _ = await parked(api)
    status, body = await api.call(
        "POST", f"/v1/runs/{run_id}/takeover/request", as_="bob", json={"reason": "mine"}
    )
    assert status == 409, body
    status, done = await start(api, "straight")
    await wait_status(api.engine, done["id"], RunStatus.COMPLETED)
    status, body = await api.call(
        "POST", f"/v1/runs/{done['id']}/takeover/request", as_="bob", json={"reason": "late"}
    )
    assert status == 409, body
    status, body = await api.call(
        "POST", f"/v1/runs/{done['id']}/takeover/request", as_="agent", json={"reason": "x"}
    )
    assert status == 403


async def test_a_request_of_another_run_is_not_found(api: Api) -> None:
    run_a, request_a = await parked(api)
    run_b, _ = await parked(api)
    before = await api.engine.store.get_takeover(request_a)
    for verb, body in (
        ("grant", {"release": True}),
        ("deny", {}),
        ("release", {}),
        ("answer", {"sdpAnswer": "x"}),
    ):
        status, reply = await api.call(
            "POST", f"/v1/runs/{run_b}/takeover/{request_a}/{verb}", as_="bob", json=body
        )
        assert status == 404 and reply["error"] == "not_found", (verb, reply)
    status, reply = await api.call(
        "POST", f"/v1/runs/{run_a}/takeover/no-such-request/grant", as_="bob", json={}
    )
    assert status == 404
    assert await api.engine.store.get_takeover(request_a) == before
    assert (await api.engine.store.get_run(run_a)).status == RunStatus.WAITING
