"""Slack is mounted only when Signoff can verify Slack's signature: a bot token without a
signing secret (or a secret without a token) leaves ``/slack/events`` unmounted, so an
unsigned click or command acts on nothing (issue 22, finding 1)."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.assembly import EngineOptions
from engine.config import parse_config
from tests.integration.slack.harness import SECRET, signed_headers
from tests.support.clock import ManualClock
from tests.support.engines import PEOPLE

COMMAND = "command=%2Fsignoff&text=gate+off&user_id=U0ALICE01&team_id=T0SIGNOFF"


@pytest.mark.parametrize(
    "slack",
    [
        "slack: {botToken: xoxb-1-token}\n",
        "slack: {botToken: xoxb-1-token, signingSecret: ''}\n",
        f"slack: {{signingSecret: '{SECRET}'}}\n",
        "",
    ],
)
async def test_slack_without_both_credentials_is_not_mounted(migrated_db_url: str, slack: str):
    text = f"database: {{url: '{migrated_db_url}'}}\n{PEOPLE}{slack}"
    config = parse_config(text, {})
    assert not config.slack.enabled
    app = create_app(config, EngineOptions(clock=ManualClock()), run_background=False)
    paths = {r.resource.canonical for r in app.router.routes() if r.resource is not None}
    assert "/slack/events" not in paths
    async with TestClient(TestServer(app)) as client:
        for headers in (
            {"Content-Type": "application/x-www-form-urlencoded"},
            signed_headers(COMMAND),
        ):
            resp = await client.post("/slack/events", data=COMMAND, headers=headers)
            assert resp.status == 404
        assert (await app[ENGINE].gate.status()).overrides == ()
