"""Who is an admin, one rule at every entry point (issue 31): a person listed in ``admins:`` acts
as an admin through any credential bound to them; a token whose person is not listed does not,
whatever its role, and is told so truly; an admin token bound to nobody is no admin. Real
HTTP, a real engine and database. The chat commands' listed and unlisted people (alice, bob) are
in tests/integration/slack/test_slack_commands.py and teams/test_teams_commands.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.domain.model import Role, RunStatus
from tests.support.api import Api, running_api
from tests.support.engines import wait_status
from tests.support.web import page, pending_request, sign_in

FLOWS = """
pay:
  nodes:
    - {id: approve, type: approval, reason: "Pay the invoice", approvers: [bob],
       channels: [web]}
"""
NOT_LISTED = {
    # token: the truth the refusal tells (people: alice is the one in admins:)
    "carol": "carol's token is an approver token and carol is not listed in admins:",
    "carol-admin": "carol's token is an admin token, but carol is not listed in admins:",
    "nobody": "this approver token names no person, and only people listed in admins: "
    "act as admins",
    "unbound-admin": "this admin token names no person, and only people listed in admins: "
    "act as admins",
    "alice-agent": "this is an agent token, and agent tokens never act as admins",
}


@pytest.fixture
async def api(migrated_db_url: str) -> AsyncIterator[Api]:
    async with running_api(migrated_db_url, FLOWS) as api:
        await api.token("alice-approver", Role.APPROVER, "alice")  # alice is in admins:
        await api.token("carol-admin", Role.ADMIN, "carol")  # made before carol left admins:
        await api.token("nobody", Role.APPROVER)
        await api.token("unbound-admin", Role.ADMIN)
        await api.token("alice-agent", Role.AGENT, "alice")
        yield api


async def waiting_run(api: Api) -> str:
    status, run = await api.call("POST", "/v1/runs", as_="agent", json={"workflow": "pay"})
    assert status == 201, run
    await wait_status(api.engine, run["id"], RunStatus.WAITING)
    run_id: str = run["id"]
    return run_id


async def test_a_listed_persons_approver_token_changes_the_gate(api: Api) -> None:
    status, body = await api.call(
        "PATCH", "/v1/gate", as_="alice-approver", json={"threshold": 0.6}
    )
    assert status == 200, body
    (override,) = (await api.engine.gate.status()).overrides
    assert (override.setting, override.value, override.updated_by) == ("threshold", 0.6, "alice")


async def test_a_token_whose_person_is_not_listed_may_not_change_the_gate(api: Api) -> None:
    for token, why in NOT_LISTED.items():
        status, body = await api.call("PATCH", "/v1/gate", as_=token, json={"threshold": 0.1})
        assert status == 403 and body["error"] == "forbidden", body
        assert body["message"] == f"this needs the admin role; {why}", body
    assert (await api.engine.gate.status()).overrides == ()


async def test_a_listed_persons_approver_token_cancels_a_run(api: Api) -> None:
    for token in ("alice-approver",):
        run_id = await waiting_run(api)
        status, body = await api.call("POST", f"/v1/runs/{run_id}/cancel", as_=token)
        assert status == 200, (token, body)
        assert (await api.engine.store.get_run(run_id)).status == RunStatus.CANCELLED


async def test_a_token_whose_person_is_not_listed_may_not_cancel_a_run(api: Api) -> None:
    run_id = await waiting_run(api)
    for token, why in NOT_LISTED.items():
        status, body = await api.call("POST", f"/v1/runs/{run_id}/cancel", as_=token)
        assert status == 403, (token, body)
        assert body["message"] == f"this needs the admin role; {why}", body
    assert (await api.engine.store.get_run(run_id)).status == RunStatus.WAITING


async def test_the_console_treats_a_listed_persons_approver_token_as_an_admin(api: Api) -> None:
    run_id = await waiting_run(api)
    request = await pending_request(api.engine, run_id)  # approvers: bob only

    await sign_in(api.client, api.tokens["alice-approver"])
    _, html = await page(api.client, "/console")
    assert "alice · admin" in html
    status, html = await page(api.client, f"/approvals/{request.id}")
    assert status == 200 and "Pay the invoice" in html  # an admin sees what it asks

    api.client.session.cookie_jar.clear()
    await sign_in(api.client, api.tokens["carol-admin"])
    _, html = await page(api.client, "/console")
    assert "carol · approver" in html
    status, html = await page(api.client, f"/approvals/{request.id}")
    assert status == 403 and "Pay the invoice" not in html
