"""Signoff installed through Slack OAuth (``slack.clientId``) against ``FakeSlack``: installs
driven as a browser drives them, and requests signed as Slack signs them, per workspace.

The state cookie bolt sets is ``Secure``: an HTTP client over plain http does not send it back,
so ``install`` carries it by hand, as a browser on https would.
"""

from __future__ import annotations

import html
import json
import re
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import Role
from tests.fakes.slack import FakeSlack
from tests.integration.slack.harness import SECRET, block_actions, signed_headers
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.ids import SequentialIds

CLIENT_ID = "1111.2222"
CLIENT_SECRET = "c1ient-secret-0f-the-app"
SECRET_KEY = "a-secret-key-of-at-least-32-characters!"
COOKIE = "slack-app-oauth-state"


@dataclass
class Started:
    """What ``/slack/install`` gave a browser: the authorize URL's state, and its cookie."""

    status: int
    state: str
    cookie: str  # the Set-Cookie header
    redirect_uri: str
    scopes: list[str]


@dataclass
class OAuthHarness:
    api: Api
    slack: FakeSlack

    @property
    def engine(self) -> Any:
        return self.api.engine

    async def start_install(self) -> Started:
        resp = await self.api.client.get("/slack/install")
        page = await resp.text()
        self.api.client.session.cookie_jar.clear()  # the test carries cookies by hand
        found = re.search(r'href="([^"]+/oauth/v2/authorize[^"]*)"', page)
        assert found is not None, page
        query = parse_qs(urlsplit(html.unescape(found.group(1))).query)
        return Started(
            resp.status,
            query["state"][0],
            resp.headers.get("Set-Cookie", ""),
            query["redirect_uri"][0],
            query["scope"][0].split(","),
        )

    async def redirect(self, cookie_state: str | None, **query: str) -> tuple[int, str]:
        """Slack sends the browser back to the redirect URL, with the cookie it holds."""
        headers = {"Cookie": f"{COOKIE}={cookie_state}"} if cookie_state is not None else {}
        resp = await self.api.client.get(
            "/slack/oauth_redirect?" + urlencode(query), headers=headers
        )
        self.api.client.session.cookie_jar.clear()
        return resp.status, await resp.text()

    async def install(self, team: str, name: str = "") -> tuple[int, str]:
        """The whole round trip: install page, "Allow" in Slack, back to Signoff."""
        started = await self.start_install()
        code = self.slack.approve(
            CLIENT_ID, team, team_name=name, redirect_uri=started.redirect_uri
        )
        return await self.redirect(started.state, code=code, state=started.state)

    async def send(self, body: str, content_type: str | None = None) -> tuple[int, str]:
        headers = signed_headers(body)
        if content_type is not None:
            headers["Content-Type"] = content_type
        resp = await self.api.client.post("/slack/events", data=body, headers=headers)
        return resp.status, await resp.text()

    async def click(
        self, team: str, user: str, action_id: str, value: str, *, channel: str, key: str
    ) -> tuple[int, str]:
        """A signed ``block_actions`` from ``user`` of workspace ``team``."""
        body = block_actions(
            user,
            action_id,
            value,
            channel=channel,
            message_ts="1.0",
            response_url=self.slack.response_url(key),
            trigger_id=self.slack.trigger(),
            team=team,
        )
        return await self.send(body)

    async def event(self, team: str, event: dict[str, Any], event_id: str) -> tuple[int, str]:
        """A signed Events API callback from workspace ``team``."""
        body = {
            "token": "unused-verification-token",
            "team_id": team,
            "api_app_id": "A0SIGNOFF",
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
        }
        return await self.send(json.dumps(body), "application/json")

    def told(self, key: str) -> list[str]:
        return [r.body.get("text", "") for r in self.slack.responses if r.key == key]


def oauth_config(
    db_url: str, slack: FakeSlack, people: str, workflows: str, slack_extra: str = "", **server: str
) -> str:
    server_keys = {"secretKey": SECRET_KEY, "publicUrl": "http://signoff.test", **server}
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 4, pollSeconds: 0.05, "
        + ", ".join(f"{k}: '{v}'" for k, v in server_keys.items() if v)
        + "}\n"
        f"slack: {{clientId: '{CLIENT_ID}', clientSecret: '{CLIENT_SECRET}', "
        f"signingSecret: '{SECRET}', apiBaseUrl: '{slack.api_url}'{slack_extra}}}\n"
        + textwrap.dedent(people)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(workflows), "  ")
    )


@asynccontextmanager
async def running_oauth(
    db_url: str,
    people: str,
    workflows: str,
    *,
    client_secret: str = CLIENT_SECRET,
    tokens: bool = True,
    slack_extra: str = "",
) -> AsyncIterator[OAuthHarness]:
    """The real app on a loopback port, Slack installed through OAuth, the Web API a
    ``FakeSlack`` that knows the app as ``CLIENT_ID`` / ``client_secret``. ``tokens=False``:
    a second app on a database that has the API token already."""
    async with FakeSlack() as slack:
        slack.app(CLIENT_ID, client_secret)
        options = EngineOptions(
            clock=ManualClock(),
            ids=SequentialIds("id"),
            owner="oauth-test",
            sweep_interval_seconds=3600.0,
        )
        text = oauth_config(db_url, slack, people, workflows, slack_extra)
        config = parse_config(text, {})
        for person in config.people.values():  # members of the fake's directory (views.publish)
            if slack_id := person.ids.get("slack"):
                slack.add_user(slack_id.rpartition("/")[2])
        app = create_app(config, options)
        client = TestClient(TestServer(app))
        await client.start_server()
        api = Api(client, app[ENGINE], {})
        api.engine.dispatcher.sinks["slack"].min_interval = 0.0
        if tokens:
            await api.token("agent", Role.AGENT)
        try:
            yield OAuthHarness(api, slack)
        finally:
            await client.close()
