"""Signed callbacks of held calls, delivered to a local receiver over real HTTP."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver
from aiohttp.test_utils import TestServer

from engine.adapters.callbacks import SIGNATURE_HEADER, CallbackSink, verify
from engine.adapters.outbound import OutboundGuard
from engine.config import parse_config
from engine.domain.errors import ConfigError
from tests.integration.test_api_calls import CALLS, FLOW, REFUND
from tests.support.api import config_text, running_api
from tests.support.clock import ManualClock
from tests.support.engines import wait_for

SECRET = "s3cret-for-tests"


class Receiver:
    """Answers with the given statuses in turn (the last one repeats) and records each POST."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.received: list[tuple[dict[str, str], bytes]] = []
        app = web.Application()
        app.router.add_post("/hook", self.hook)
        self.server = TestServer(app)

    async def hook(self, request: web.Request) -> web.Response:
        self.received.append((dict(request.headers), await request.read()))
        status = self.statuses[min(len(self.received), len(self.statuses)) - 1]
        return web.json_response({"ok": status < 300}, status=status)

    @property
    def url(self) -> str:
        return str(self.server.make_url("/hook"))


@pytest.fixture
async def receiver_factory():
    started: list[Receiver] = []

    async def make(statuses: list[int]) -> Receiver:
        receiver = Receiver(statuses)
        await receiver.server.start_server()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        await receiver.server.close()


@pytest.fixture
def clock():
    return ManualClock()


LOOPBACK_ALLOWED = "allowInternalTargets: ['127.0.0.1/32']"


@pytest.fixture
async def api(migrated_db_url, clock):
    """The receivers listen on loopback, which the deployment here allows explicitly."""
    async with running_api(
        migrated_db_url, FLOW, extra=CALLS, server=LOOPBACK_ALLOWED, clock=clock
    ) as api:
        guard = OutboundGuard(api.engine.config.server.allow_internal_targets)
        sink = CallbackSink(api.engine.store, api.engine.clock, SECRET, guard=guard)
        api.engine.add_sink("callback", sink)
        yield api


def _expected_signature(headers: dict[str, str], body: bytes) -> tuple[int, str]:
    fields = dict(part.split("=", 1) for part in headers[SIGNATURE_HEADER].split(","))
    timestamp = int(fields["t"])
    mac = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return timestamp, f"t={timestamp},v1={mac.hexdigest()}"


async def _callback_rows(api, execution_id):
    rows = await api.engine.store.outbox_messages(run_id=execution_id)
    return [(record, status) for record, status, _ in rows if record.kind == "callback"]


async def test_outcome_is_signed_and_retried_after_a_500(api, clock, receiver_factory):
    receiver = await receiver_factory([500, 200])
    status, body = await api.call(
        "POST",
        "/v1/calls",
        as_="agent",
        json={
            "connector": "demo-ledger",
            "action": "lookup",
            "args": {"order": "o-7"},
            "callbackUrl": receiver.url,
        },
    )
    assert status == 200 and body["status"] == "executed", body
    execution_id = body["executionId"]

    async def hits(n):
        return len(receiver.received) >= n

    await wait_for(lambda: hits(1))

    async def retry_scheduled():
        ((record, state),) = await _callback_rows(api, execution_id)
        return record.attempts == 1 and (record, state)

    record, state = await wait_for(retry_scheduled)
    assert (record.channel, state) == (f"callback:{execution_id}", "pending")

    clock.advance(seconds=3)  # past the dispatcher's first back-off (2 s)
    api.engine.wake_outbox()
    await wait_for(lambda: hits(2))

    sent_at = int(clock.now().timestamp())
    for (headers, raw), when in zip(receiver.received, (sent_at - 3, sent_at), strict=True):
        timestamp, expected = _expected_signature(headers, raw)
        assert headers[SIGNATURE_HEADER] == expected and timestamp == when
        assert verify(SECRET.encode(), headers[SIGNATURE_HEADER], raw) == timestamp
        assert verify(b"another key", headers[SIGNATURE_HEADER], raw) is None
        assert headers["Content-Type"] == "application/json"
        payload = json.loads(raw)
        assert payload["executionId"] == execution_id and payload["status"] == "executed"
        assert payload["result"]["order"] == "o-7"

    async def delivered():
        rows = await _callback_rows(api, execution_id)
        return rows and rows[0][1] == "sent"

    await wait_for(delivered)


async def test_denial_is_called_back_and_a_4xx_is_not_retried(api, clock, receiver_factory):
    receiver = await receiver_factory([410])
    status, body = await api.call(
        "POST", "/v1/calls", as_="agent", json={**REFUND, "callbackUrl": receiver.url}
    )
    assert status == 202
    await api.call(
        "POST",
        f"/v1/runs/{body['executionId']}/takeover/{body['requestId']}/deny",
        as_="bob",
        json={"notes": "wrong customer"},
    )

    async def failed_for_good():
        rows = await _callback_rows(api, body["executionId"])
        return rows and rows[0][1] == "failed"

    await wait_for(failed_for_good)
    ((headers, raw),) = receiver.received
    assert json.loads(raw) == {
        "executionId": body["executionId"],
        "status": "denied",
        "reason": "wrong customer",
        "decidedBy": "bob",
    }
    assert _expected_signature(headers, raw)[1] == headers[SIGNATURE_HEADER]
    clock.advance(minutes=10)
    api.engine.wake_outbox()
    assert len(receiver.received) == 1  # permanent: never sent again


async def test_runs_without_callback_url_queue_nothing(api):
    _, body = await api.call(
        "POST",
        "/v1/calls",
        as_="agent",
        json={"connector": "demo-ledger", "action": "lookup", "args": {"order": "o"}},
    )
    assert await _callback_rows(api, body["executionId"]) == []


def test_empty_secret_signs_with_a_process_key_and_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="engine.adapters.callbacks"):
        sink = CallbackSink(store=None, clock=ManualClock(), secret_key="")  # type: ignore[arg-type]
    other = CallbackSink(store=None, clock=ManualClock(), secret_key="")  # type: ignore[arg-type]
    assert len(sink.key) == 32 and sink.key != other.key
    assert "secretKey is empty" in caplog.text


LOOKUP = {"connector": "demo-ledger", "action": "lookup", "args": {"order": "o"}}


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/x",
        "http://192.168.1.1/x",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
        "http://[fd00::1]/x",
        "http://100.64.0.1/x",
        "http://0.0.0.0/x",
        "http://localhost/x",
        "http://app.localhost/x",
    ],
)
async def test_internal_callback_urls_are_refused_and_nothing_is_stored(migrated_db_url, url):
    async with running_api(migrated_db_url, FLOW, extra=CALLS) as api:
        status, body = await api.call(
            "POST", "/v1/calls", as_="agent", json={**LOOKUP, "callbackUrl": url}
        )
        assert status == 400, body
        assert "internal address" in body["message"]
        assert await api.engine.store.list_runs(limit=10) == []


class FakeDns(AbstractResolver):
    """Resolves every name to 127.0.0.1, as a name an agent controls could."""

    async def resolve(self, host, port=0, family=socket.AF_INET):
        return [
            {
                "hostname": host,
                "host": "127.0.0.1",
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
        ]

    async def close(self):
        pass


@pytest.mark.parametrize("allowed", [False, True], ids=["refused", "allow-listed"])
async def test_a_name_resolving_inside_is_checked_when_called(
    migrated_db_url, receiver_factory, allowed
):
    """A public-looking name passes the check on arrival; what it resolves to is checked at
    connect time: refused for good, unless the deployment allows the network."""
    receiver = await receiver_factory([200])
    server = LOOPBACK_ALLOWED if allowed else ""
    async with running_api(migrated_db_url, FLOW, extra=CALLS, server=server) as api:
        networks = api.engine.config.server.allow_internal_targets
        guard = OutboundGuard(networks, resolver=FakeDns())
        api.engine.add_sink(
            "callback", CallbackSink(api.engine.store, api.engine.clock, SECRET, guard=guard)
        )
        url = f"http://hooks.agent.example:{receiver.server.port}/hook"
        status, body = await api.call(
            "POST", "/v1/calls", as_="agent", json={**LOOKUP, "callbackUrl": url}
        )
        assert status == 200, body

        async def settled():
            rows = await _callback_rows(api, body["executionId"])
            return rows and rows[0][1] in ("failed", "sent") and rows[0]

        record, state = await wait_for(settled)
    if allowed:
        assert state == "sent" and len(receiver.received) == 1
    else:
        assert state == "failed" and record.attempts == 1
        assert receiver.received == []


def test_allow_list_must_hold_networks():
    with pytest.raises(ConfigError) as caught:
        parse_config(
            config_text("sqlite+aiosqlite:///x.db", FLOW, server="allowInternalTargets: [nope]"), {}
        )
    assert "server.allowInternalTargets[0]: must be an IP network" in caught.value.message
