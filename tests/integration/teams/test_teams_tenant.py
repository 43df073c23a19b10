"""``teams.tenantId``: activities from another Microsoft 365 tenant act on nothing (issue 29,
item 7), even with a valid Bot Framework token.

Teams puts the tenant in the activity (``channelData.tenant.id`` and ``conversation.tenantId``);
the channel's token carries none (``tests.fakes.openid`` signs them as Bot Framework does), so
the activity's own statement, authenticated by that token, is what is checked: every tenant id
it states must be the configured one, and with ``tenantId`` set one naming none is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from teamsharness import FLOW, TENANT, Teams, running_teams, start_run

from engine.domain.model import RunStatus, TakeoverStatus
from tests.fakes.openid import new_key, openid_server, teams_config, token
from tests.support.engines import wait_status

OTHER = "0b1c2d3e-4f50-4617-8a9b-0c1d2e3f4a5b"


def tenant_config(metadata_url: str, tenant: str = TENANT) -> str:
    return teams_config(metadata_url).replace("}\n", f", tenantId: '{tenant}'}}\n")


@pytest.fixture
def signing_key():
    return new_key()


@pytest.fixture
async def teams(migrated_db_url, signing_key):
    with openid_server(signing_key) as metadata_url:
        async with running_teams(migrated_db_url, FLOW, teams=tenant_config(metadata_url)) as t:
            yield t


async def pending_request(teams: Teams) -> str:
    run_id = await start_run(teams)
    await wait_status(teams.engine, run_id, RunStatus.WAITING)
    (request,) = await teams.engine.store.list_takeovers(run_id=run_id)
    return request.id


def from_tenant(activity: dict[str, Any], tenant: object) -> dict[str, Any]:
    """``activity`` as Teams sends it from ``tenant`` (both places Teams names it)."""
    activity["conversation"]["tenantId"] = tenant
    activity["channelData"]["tenant"] = {"id": tenant}
    return activity


async def assert_still_pending(teams: Teams, request_id: str) -> None:
    after = await teams.engine.store.get_takeover(request_id)
    assert after.status is TakeoverStatus.PENDING and after.votes == ()


async def test_a_valid_token_for_another_tenants_grant_decides_nothing(teams: Teams, signing_key):
    request_id = await pending_request(teams)
    bearer = token(signing_key, teams.connector.service_url)
    click = from_tenant(teams.click_activity("grant", request_id, as_="bob"), OTHER)
    status, body = await teams.post(click, Authorization=f"Bearer {bearer}")
    assert status == 403 and body["error"] == "wrong_tenant", body
    assert set(body) == {"error", "message"} and OTHER in body["message"]
    await assert_still_pending(teams, request_id)
    # The same click from the bot's own tenant decides.
    click = teams.click_activity("grant", request_id, as_="bob")
    status, body = await teams.post(click, Authorization=f"Bearer {bearer}")
    assert status == 200, body
    after = await teams.engine.store.get_takeover(request_id)
    assert after.status is not TakeoverStatus.PENDING


SMUGGLED = {
    "in the conversation only": lambda a: a["conversation"].update(tenantId=OTHER),
    "in channelData only": lambda a: a["channelData"].update(tenant={"id": OTHER}),
    "as tenantID, the SDK's spelling": lambda a: a["conversation"].update(tenantID=OTHER),
    "named nowhere": lambda a: (a["conversation"].pop("tenantId"), a.pop("channelData")),
    "a null tenant and no other": lambda a: (
        a["conversation"].pop("tenantId"),
        a["channelData"].update(tenant={"id": None}),
    ),
    "a number": lambda a: a["channelData"].update(tenant={"id": 7}),
    "a list": lambda a: a["channelData"].update(tenant=[TENANT]),
}


@pytest.mark.parametrize("case", list(SMUGGLED))
async def test_any_other_or_missing_tenant_is_refused(teams: Teams, signing_key, case: str):
    request_id = await pending_request(teams)
    click = teams.click_activity("grant", request_id, as_="bob")
    SMUGGLED[case](click)
    bearer = token(signing_key, teams.connector.service_url)
    status, body = await teams.post(click, Authorization=f"Bearer {bearer}")
    assert status == 403 and body["error"] == "wrong_tenant", body
    await assert_still_pending(teams, request_id)


async def test_a_token_naming_another_tenant_is_refused(teams: Teams, signing_key):
    # Bot Framework channel tokens carry no tenant; one that does must name ours.
    request_id = await pending_request(teams)
    bearer = token(signing_key, teams.connector.service_url, tid=OTHER)
    status, body = await teams.post(
        teams.click_activity("grant", request_id, as_="bob"), Authorization=f"Bearer {bearer}"
    )
    assert status == 403 and body["error"] == "wrong_tenant", body
    await assert_still_pending(teams, request_id)


async def test_unsigned_activities_are_held_to_the_tenant_too(migrated_db_url):
    unsigned = f"teams: {{insecureLocalDev: true, tenantId: '{TENANT}'}}\n"
    async with running_teams(migrated_db_url, FLOW, teams=unsigned) as teams:
        request_id = await pending_request(teams)
        click = from_tenant(teams.click_activity("grant", request_id, as_="bob"), OTHER)
        status, body = await teams.post(click)
        assert status == 403 and body["error"] == "wrong_tenant", body
        await assert_still_pending(teams, request_id)
        status, _ = await teams.post(teams.click_activity("grant", request_id, as_="bob"))
        assert status == 200
        after = await teams.engine.store.get_takeover(request_id)
        assert after.status is not TakeoverStatus.PENDING


@pytest.mark.parametrize(
    ("required", "named", "refused"),
    [
        ("", [None, OTHER], False),  # no tenantId: any tenant
        (TENANT, [TENANT, TENANT, None, None], False),
        (TENANT, [TENANT.upper(), None], False),  # a GUID's case is no identity
        (TENANT, [None, None, None], True),
        (TENANT, [TENANT, OTHER], True),
        (TENANT, [f" {TENANT}"], True),
        (TENANT, [""], True),
        (TENANT, [{"id": TENANT}], True),
    ],
)
def test_tenant_refusal(required: str, named: list[object], refused: bool):
    from bot.teams.activities import tenant_refusal  # here: the module loads without it

    assert (tenant_refusal(required, named) is not None) is refused
