"""``bot.client`` against a running server: real HTTP, approvals through the takeover API."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.client import (
    ApiError,
    ApprovalDenied,
    ApprovalExpired,
    CallBlocked,
    CallFailed,
    CallStillPending,
    Hold,
    SignoffClient,
    requires_approval,
)
from engine.domain.model import TakeoverStatus
from tests.integration.test_api_calls import CALLS, FLOW
from tests.support.api import running_api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
async def api(migrated_db_url, clock):
    async with running_api(migrated_db_url, FLOW, extra=CALLS, clock=clock) as api:
        yield api


@pytest.fixture
async def client(api):
    async with SignoffClient(str(api.client.make_url("")), api.tokens["agent"]) as client:
        yield client


async def _pending_request(api):
    async def find():
        pending = await api.engine.store.list_takeovers(statuses=[TakeoverStatus.PENDING])
        return pending[0] if pending else None

    return await wait_for(find)


async def _decide(api, verb, as_="bob", **body):
    request = await _pending_request(api)
    status, answer = await api.call(
        "POST", f"/v1/runs/{request.run_id}/takeover/{request.id}/{verb}", as_=as_, json=body
    )
    assert status == 200, answer
    return request


async def test_allowed_call_returns_the_result(client):
    result = await client.call("demo-ledger", "lookup", {"order": "o-1"})
    assert result["order"] == "o-1"


async def test_held_call_waits_for_the_approval(api, client):
    call = asyncio.create_task(
        client.call("demo-ledger", "refund", {"order": "o-2", "amount": 5}, reason="refund o-2")
    )
    request = await _decide(api, "grant", release=True)
    assert request.reason == "refund o-2"
    result = await asyncio.wait_for(call, 20)
    assert result["recorded"] is True and result["action"] == "refund"


async def test_denial_raises_with_the_reason(api, client):
    call = asyncio.create_task(client.call("demo-ledger", "refund", {"order": "o-3"}))
    await _decide(api, "deny", notes="duplicate refund")
    with pytest.raises(ApprovalDenied) as caught:
        await asyncio.wait_for(call, 20)
    assert caught.value.reason == "duplicate refund" and caught.value.decided_by == "bob"


async def test_expiry_raises(api, client, clock):
    call = asyncio.create_task(client.call("demo-ledger", "note", {"text": "x"}))
    await _pending_request(api)
    clock.advance(hours=3)  # approvals.ttl is 2h
    with pytest.raises(ApprovalExpired):
        await asyncio.wait_for(call, 20)


async def test_block_failure_and_api_errors_are_typed(api, client):
    with pytest.raises(CallBlocked) as blocked:
        await client.call("demo-ledger", "purge", {})
    assert blocked.value.rule == "no-purge"
    with pytest.raises(CallFailed, match="lookup needs an order"):
        await client.call("demo-ledger", "lookup", {})
    with pytest.raises(ApiError) as missing:
        await client.call("demo-ledger", "nope", {})
    assert missing.value.status == 404 and missing.value.code == "not_found"
    with pytest.raises(CallStillPending):
        await client.call("demo-ledger", "note", {"text": "later"}, wait_seconds=0)


async def test_decorator_runs_the_function_only_once_approved(api, client):
    ran: list[tuple[str, float]] = []

    @requires_approval(connector="demo-ledger", action="refund", client=client)
    async def refund(order: str, amount: float = 1.5) -> str:
        ran.append((order, amount))
        return f"refunded {order}"

    call = asyncio.create_task(refund("o-4"))
    request = await _decide(api, "grant", release=True)
    assert request.details["args"] == {"order": "o-4", "amount": 1.5}
    assert request.details["mode"] == "approve_only"
    assert await asyncio.wait_for(call, 20) == "refunded o-4"
    assert ran == [("o-4", 1.5)]
    assert await api.engine.store.ledger(run_id=request.run_id) == []  # the server ran nothing

    denied = asyncio.create_task(refund(order="o-5", amount=2))
    await _decide(api, "deny", as_="carol", notes="no")
    with pytest.raises(ApprovalDenied, match="no"):
        await asyncio.wait_for(denied, 20)
    assert ran == [("o-4", 1.5)]


async def test_decorator_on_an_allowed_action_runs_at_once(client):
    @requires_approval(connector="demo-ledger", action="lookup", client=client)
    async def lookup(order: str) -> str:
        return order.upper()

    assert await lookup(order="o-6") == "O-6"


async def test_a_held_call_tells_on_hold_where_to_decide_once(api, client):
    holds: list[Hold] = []

    async def on_hold(hold: Hold) -> None:
        assert await api.engine.store.list_takeovers(statuses=[TakeoverStatus.PENDING])
        holds.append(hold)

    call = asyncio.create_task(
        client.call("demo-ledger", "refund", {"order": "o-7"}, on_hold=on_hold, wait_seconds=1)
    )
    with pytest.raises(CallStillPending):  # told, then polled until wait_seconds ran out
        await asyncio.wait_for(call, 20)
    (hold,) = holds
    request = await _pending_request(api)
    assert (hold.connector, hold.action) == ("demo-ledger", "refund")
    assert hold.approval_url is not None and hold.approval_url.endswith(f"/approvals/{request.id}")
    assert hold.expires_at and hold.summary
    status = await client.status(hold.execution_id)
    assert status["approvalUrl"] == hold.approval_url


async def test_the_decorator_passes_on_hold_and_a_plain_function_will_do(api, client):
    urls: list[str | None] = []

    @requires_approval(
        connector="demo-ledger",
        action="refund",
        client=client,
        on_hold=lambda hold: urls.append(hold.approval_url),
    )
    async def refund(order: str) -> str:
        return order

    call = asyncio.create_task(refund("o-8"))

    async def told() -> bool:
        return bool(urls)

    await wait_for(told)  # a person decides once told where: a decision before may be unseen
    request = await _decide(api, "grant", release=True)
    assert await asyncio.wait_for(call, 20) == "o-8"
    assert len(urls) == 1 and urls[0] and urls[0].endswith(f"/approvals/{request.id}")


async def test_without_on_hold_a_held_call_logs_its_approval_url(api, client, caplog):
    call = asyncio.create_task(client.call("demo-ledger", "refund", {"order": "o-9"}))

    async def logged() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "bot.client"]

    (record,) = await wait_for(logged)  # the person reads where to decide, then decides
    request = await _decide(api, "grant", release=True)
    await asyncio.wait_for(call, 20)
    assert len(await logged()) == 1
    assert record.levelname == "WARNING"
    assert f"/approvals/{request.id}" in record.getMessage()
    assert "demo-ledger.refund is waiting for a person to decide" in record.getMessage()
