"""The ``webhook:<name>`` channel: the approval view as JSON, signed, with per-approver links,
retried on 5xx and 429 and given up on other 4xx. The receiver is a real local HTTP server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from engine.adapters.callbacks import verify
from engine.domain.model import RunStatus, TakeoverStatus
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_for, wait_status
from tests.support.web import local, page, pending_request, submit

FLOW = """
refund:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.amount }}", approvers: [finance],
       channels: ["webhook:ops"]}
    - {id: pay, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
"""
SECRET = "whsec-test-0123456789"


@dataclass
class Receiver:
    """A webhook endpoint that answers the statuses it is given, then 200."""

    answers: list[int] = field(default_factory=list)
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.read()))
        status = self.answers.pop(0) if self.answers else 200
        return web.Response(status=status, headers={"Retry-After": "0"}, text="noted")

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.received]


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    hook = Receiver()
    app = web.Application()
    app.router.add_post("/hook", hook.handle)
    server = TestServer(app)
    await server.start_server()
    try:
        yield hook, str(server.make_url("/hook"))
    finally:
        await server.close()


@pytest.fixture
async def api(migrated_db_url: str, receiver: tuple[Receiver, str]) -> AsyncIterator[Api]:
    extra = f"webhooks:\n  ops: {{url: '{receiver[1]}', secret: '{SECRET}'}}\n"
    async with running_api(migrated_db_url, FLOW, extra=extra, clock=ManualClock()) as api:
        yield api


async def _statuses(api: Api, run_id: str) -> list[str]:
    return [status for _, status, _ in await api.engine.store.outbox_messages(run_id=run_id)]


async def test_the_card_is_posted_signed_with_links_that_decide(
    api: Api, receiver: tuple[Receiver, str]
) -> None:
    hook, _ = receiver
    run, _ = await api.engine.runs.start_run("refund", {"order": "A-1", "amount": "12.50"}, AGENT)
    request = await pending_request(api.engine, run.id)
    await wait_for(lambda: _sent(api, run.id, 1))

    headers, raw = hook.received[0]
    assert verify(SECRET.encode(), headers["X-Signoff-Signature"], raw) is not None
    assert headers["X-Signoff-Delivery"] == f"card:{request.id}:webhook:ops"
    body = json.loads(raw)
    assert body["event"] == "card" and body["notice"] is None
    approval = body["approval"]
    assert approval["requestId"] == request.id and approval["status"] == "pending"
    assert approval["arguments"] == {"order": "A-1", "amount": "12.50"}
    assert approval["connector"] == "demo-ledger" and approval["action"] == "refund"
    assert approval["approvalUrl"] == f"http://signoff.test/approvals/{request.id}"
    assert approval["actions"] == ["grant", "deny", "takeover"]
    assert sorted(body["links"]) == ["alice", "bob", "carol"]

    resp = await submit(api.client, local(body["links"]["carol"]), {"action": "grant"})
    assert resp.status == 303
    await wait_status(api.engine, run.id, RunStatus.COMPLETED)
    await wait_for(lambda: _sent(api, run.id, 4))
    later = {(b["event"], b["notice"]): b for b in hook.bodies()[1:]}
    assert set(later) == {("card_update", None), ("notice", "decision"), ("notice", "step_result")}
    for key in (("card_update", None), ("notice", "decision")):
        assert later[key]["approval"]["status"] == "released" and later[key]["links"] == {}
    result = later[("notice", "step_result")]
    assert result["approval"] is None and result["runId"] == run.id
    assert result["data"]["ok"] is True and result["data"]["stepId"] == "pay"


async def test_server_errors_are_retried_and_client_errors_are_not(
    api: Api, receiver: tuple[Receiver, str]
) -> None:
    hook, _ = receiver
    hook.answers = [503, 429]
    first, _ = await api.engine.runs.start_run("refund", {"order": "A-2", "amount": "1"}, AGENT)
    await wait_for(lambda: _sent(api, first.id, 1))
    assert len(hook.received) == 3

    hook.answers = [400]
    second, _ = await api.engine.runs.start_run("refund", {"order": "A-3", "amount": "1"}, AGENT)

    async def failed() -> bool:
        return await _statuses(api, second.id) == ["failed"]

    await wait_for(failed)
    assert len(hook.received) == 4
    assert (await api.engine.store.get_run(second.id)).status == RunStatus.WAITING


async def test_a_webhook_without_a_secret_sends_no_signature(
    migrated_db_url: str, receiver: tuple[Receiver, str]
) -> None:
    hook, url = receiver
    extra = f"webhooks:\n  ops: {{url: '{url}'}}\n"
    async with running_api(migrated_db_url, FLOW, extra=extra, clock=ManualClock()) as api:
        run, _ = await api.engine.runs.start_run("refund", {"order": "A-4", "amount": "1"}, AGENT)
        await wait_for(lambda: _sent(api, run.id, 1))
        status, _ = await page(api.client, f"/approvals/{(await _request(api, run.id)).id}")
        assert status == 200
    assert "X-Signoff-Signature" not in hook.received[0][0]


async def _sent(api: Api, run_id: str, count: int) -> bool:
    return (await _statuses(api, run_id)).count("sent") >= count


async def _request(api: Api, run_id: str) -> Any:
    found = await api.engine.store.list_takeovers(run_id=run_id)
    assert found and found[0].status == TakeoverStatus.PENDING
    return found[0]
