"""Issue 29 item 12 for Teams: the Bot Connector calls (msrest over ``requests``, whose own
``NO_PROXY`` matching is a bare suffix match) take the proxy curl's rules choose, against a real
recording proxy (``tests.fakes.proxy``); the Bot Connector here is a fake on 127.0.0.1."""

from __future__ import annotations

import pytest
from teamsharness import FLOW, card_posted, running_teams, start_run, subscribed

from tests.fakes.proxy import RecordingProxy

NAMES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


@pytest.mark.parametrize(
    ("no_proxy", "through_proxy"),
    [
        ("127.0.0.1", False),
        ("10.0.0.0/8,127.0.0.0/8", False),  # CIDR, as curl reads it
        ("example.com", True),
        ("0.0.1", True),  # not a suffix match: curl sends it to the proxy
    ],
)
async def test_bot_connector_calls_take_the_proxy_curl_would(
    migrated_db_url: str, monkeypatch: pytest.MonkeyPatch, no_proxy: str, through_proxy: bool
) -> None:
    async with RecordingProxy() as proxy:
        for name in NAMES:
            monkeypatch.setenv(name, proxy.url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.setenv(name, no_proxy)
        async with running_teams(migrated_db_url, FLOW) as teams:
            await subscribed(teams)
            run_id = await start_run(teams)
            await card_posted(teams, run_id)
            fake = teams.connector.service_url.removeprefix("http://").rstrip("/")
    if through_proxy:
        assert proxy.seen and set(proxy.seen) == {fake}, proxy.seen
    else:
        assert proxy.seen == []
