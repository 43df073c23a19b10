"""The run and takeover API over real HTTP."""

from __future__ import annotations

import pytest

from engine.domain.model import RunStatus
from tests.support.api import running_api
from tests.support.engines import wait_status

FLOW = """
pay:
  nodes:
    - {id: prepare, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: approve, type: approval, reason: "Pay {{ input.order }}", channels: [web]}
    - {id: act, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
"""


@pytest.fixture
async def api(migrated_db_url):
    async with running_api(migrated_db_url, FLOW) as api:
        yield api


async def test_start_park_grant_release(api):
    status, run = await api.call(
        "POST", "/v1/runs", as_="agent", json={"workflow": "pay", "input": {"order": "o-1"}}
    )
    assert status == 201, run
    await wait_status(api.engine, run["id"], RunStatus.WAITING)
    status, listing = await api.call("GET", f"/v1/runs/{run['id']}/takeover", as_="bob")
    assert status == 200
    (tk,) = listing["requests"]
    assert tk["approvalUrl"].startswith("http://signoff.test/approvals/")
    status, body = await api.call(
        "POST", f"/v1/runs/{run['id']}/takeover/{tk['id']}/grant", as_="bob", json={"notes": "ok"}
    )
    assert status == 200 and body["status"] == "granted"
    status, body = await api.call(
        "POST", f"/v1/runs/{run['id']}/takeover/{tk['id']}/grant", as_="carol", json={}
    )
    assert status == 409 and body["error"] == "already_decided" and body["status"] == "granted"
    status, body = await api.call(
        "POST", f"/v1/runs/{run['id']}/takeover/{tk['id']}/release", as_="bob"
    )
    assert status == 200 and body["status"] == "released"
    await wait_status(api.engine, run["id"], RunStatus.COMPLETED)


async def test_auth_errors(api):
    status, body = await api.call("GET", "/v1/runs")
    assert status == 401 and body["error"] == "unauthorized"
    status, body = await api.call("POST", "/v1/runs", as_="bob", json={"workflow": "pay"})
    assert status == 403
    status, body = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": 5})
    assert status == 400 and "body.workflow" in body["message"]
    status, body = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "nope"})
    assert status == 404
