"""Real JWT validation of incoming activities when an app id is configured.

A locally generated RSA key signs the tokens; its public half is served as an OpenID metadata
document and a JWKS on loopback (``tests.fakes.openid``), and ``teams.openIdMetadataUrl`` /
``teams.tokenIssuer`` point the Bot Framework SDK at them. Only a token signed by that key,
from that issuer, for this app id, unexpired, for this serviceUrl is accepted.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from teamsharness import CHANNEL, FLOW, Teams, running_teams

from tests.fakes.openid import (
    APP_ID,
    BAD_TOKENS,
    bad_token,
    new_key,
    openid_server,
    teams_config,
    token,
)


@pytest.fixture
def signing_key():
    return new_key()


@pytest.fixture
async def teams(sqlite_url, signing_key):
    from engine.adapters.store.migrate import upgrade_to_head

    await upgrade_to_head(sqlite_url)
    with openid_server(signing_key) as metadata_url:
        async with running_teams(sqlite_url, FLOW, teams=teams_config(metadata_url)) as t:
            yield t


def install_activity(teams: Teams) -> dict[str, Any]:
    activity = teams._base(conversation=CHANNEL, kind="channel", user="alice")
    activity.update(type="conversationUpdate", membersAdded=[{"id": "28:" + APP_ID}])
    activity["recipient"] = {"id": "28:" + APP_ID, "name": "Signoff"}
    return activity


async def stored(teams: Teams) -> bool:
    return await teams.engine.store.conversation("teams", conversation_id=CHANNEL) is not None


async def test_a_valid_token_is_accepted(teams: Teams, signing_key):
    bearer = token(signing_key, teams.connector.service_url)
    status, _ = await teams.post(install_activity(teams), Authorization=f"Bearer {bearer}")
    assert status == 200
    assert await stored(teams)


@pytest.mark.parametrize("case", ["missing", *BAD_TOKENS])
async def test_bad_tokens_are_rejected_and_change_nothing(teams: Teams, signing_key, case):
    url = teams.connector.service_url
    bearer = None if case == "missing" else bad_token(case, signing_key, url, new_key())
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    status, body = await teams.post(install_activity(teams), **headers)
    assert status == 401 and body["error"] == "unauthorized" and set(body) == {"error", "message"}
    assert not await stored(teams)
    # An invoke is refused the same way: nobody decides anything with a bad token.
    status, _ = await teams.click("refresh", "id-000001", as_="bob")
    assert status == 401


async def test_a_token_for_another_url_is_refused_on_an_activity_without_one(
    teams: Teams, signing_key
):
    # The SDK matches the token's serviceurl claim only when the activity names a serviceUrl.
    bearer = token(signing_key, "https://smba.evil.example/")
    activity = install_activity(teams)
    del activity["serviceUrl"]
    status, _ = await teams.post(activity, Authorization=f"Bearer {bearer}")
    assert status in (400, 401)
    assert not await stored(teams)


# JSON no parser of ours accepts (engine.json_input), each spliced into a valid activity.
BAD_JSON = {
    "NaN": b'"x": NaN',
    "Infinity": b'"x": -Infinity',
    "1e400": b'"x": 1e400',
    "a huge integer": b'"x": ' + b"9" * 40,
    "deep nesting": b'"x": ' + b"[" * 200 + b"]" * 200,
    "NUL": b'"x": "a\\u0000b"',
    "a lone surrogate": b'"x": "\\ud800"',
}


def spliced(activity: dict[str, Any], member: bytes) -> bytes:
    return json.dumps(activity).encode()[:-1] + b", " + member + b"}"


@pytest.mark.parametrize("body", [b"", b"{not json", b"[" * 5000, *BAD_JSON.values()])
async def test_without_a_token_the_body_is_not_even_read(teams: Teams, body: bytes):
    # Authentication comes first: a caller without a token learns nothing about its body.
    status, answer = await teams.post_raw(body)
    assert status == 401 and answer["error"] == "unauthorized"
    status, _ = await teams.post_raw(spliced(install_activity(teams), BAD_JSON["NaN"]))
    assert status == 401
    assert not await stored(teams)


@pytest.mark.parametrize("case", list(BAD_JSON))
async def test_with_a_token_json_we_refuse_is_a_400_and_changes_nothing(
    teams: Teams, signing_key, case: str
):
    bearer = token(signing_key, teams.connector.service_url)
    body = spliced(install_activity(teams), BAD_JSON[case])
    status, answer = await teams.post_raw(body, Authorization=f"Bearer {bearer}")
    assert status == 400, answer
    assert answer["error"] == "invalid_json" and set(answer) == {"error", "message"}
    assert not await stored(teams)
