"""The fake Slack refuses what Slack refuses for Home tabs, user lookups and rate tiers.

Driven with slack_sdk's own client, as Signoff calls it (no retry handlers, so a 429 is seen).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack import FakeSlack


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.add_user("U0ALICE01", "alice@example.com")
        yield fake


def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.token, base_url=slack.api_url, retry_handlers=[])


def section(n: int) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": f"line {n}"}}


async def refused(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as caught:
        await call
    return caught.value


async def test_views_publish_takes_a_home_tab_within_the_limits(slack: FakeSlack) -> None:
    web = client(slack)
    home = {"type": "home", "blocks": [section(n) for n in range(100)]}
    assert (await web.views_publish(user_id="U0ALICE01", view=home))["ok"]
    assert slack.homes["U0ALICE01"] == home

    cases: dict[str, tuple[dict[str, Any], str]] = {
        "101 blocks": ({"type": "home", "blocks": [section(n) for n in range(101)]}, "/blocks"),
        "a modal": ({"type": "modal", "blocks": [section(1)]}, "/type"),
        "a long section": (
            {
                "type": "home",
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}],
            },
            "/blocks/0",
        ),
        "metadata": (
            {"type": "home", "private_metadata": "m" * 3001, "blocks": [section(1)]},
            "/private_metadata",
        ),
    }
    for name, (view, pointer) in cases.items():
        error = await refused(web.views_publish(user_id="U0ALICE01", view=view))
        assert error.response["error"] == "invalid_arguments", name
        messages = error.response["response_metadata"]["messages"]
        assert any(f"[json-pointer:/view{pointer}" in m for m in messages), (name, messages)
    assert slack.homes["U0ALICE01"] == home  # nothing refused replaced it

    error = await refused(web.views_publish(user_id="U0NOBODY1", view=home))
    assert error.response["error"] == "user_not_found"


async def test_user_lookups(slack: FakeSlack) -> None:
    web = client(slack)
    found = await web.users_lookupByEmail(email="Alice@Example.com")
    assert found["user"]["id"] == "U0ALICE01"
    assert found["user"]["is_email_confirmed"] is True
    error = await refused(web.users_lookupByEmail(email="nobody@example.com"))
    assert error.response["error"] == "users_not_found"
    info = await web.users_info(user="U0ALICE01")
    assert info["user"]["profile"]["email"] == "alice@example.com"
    error = await refused(web.users_info(user="U0NOBODY1"))
    assert error.response["error"] == "user_not_found"


async def test_rate_tiers_answer_429_with_retry_after(slack: FakeSlack) -> None:
    web = client(slack)
    home = {"type": "home", "blocks": [section(1)]}
    for _ in range(100):  # views.publish is Tier 4: 100 a minute
        await web.views_publish(user_id="U0ALICE01", view=home)
    error = await refused(web.views_publish(user_id="U0ALICE01", view=home))
    assert error.response.status_code == 429 and error.response["error"] == "ratelimited"
    wait = int(error.response.headers["Retry-After"])
    assert 1 <= wait <= 60

    for _ in range(50):  # users.lookupByEmail is Tier 3 (50), counted apart from views.publish
        await web.users_lookupByEmail(email="alice@example.com")
    error = await refused(web.users_lookupByEmail(email="alice@example.com"))
    assert error.response.status_code == 429

    slack.advance(wait)  # the fake's clock: a minute has passed for the oldest call
    assert (await web.views_publish(user_id="U0ALICE01", view=home))["ok"]
    assert slack.rate_limited == 2


async def test_a_test_that_floods_on_purpose_can_raise_a_tier(slack: FakeSlack) -> None:
    slack.tier_limits["chat.update"] = 1000
    web = client(slack)
    posted = await web.chat_postMessage(channel="C1", text="x")
    for n in range(60):  # over Tier 3's 50, allowed by the knob
        await web.chat_update(channel="C1", ts=posted["ts"], text=f"x{n}")
