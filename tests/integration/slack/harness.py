"""Signoff with Slack on, against ``FakeSlack``, driven with requests signed as Slack signs them.

Slack's signature: ``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{raw body}`` with the signing
secret, in ``X-Slack-Signature``, the timestamp in ``X-Slack-Request-Timestamp``. Interactive
payloads are form-encoded ``payload=<json>``; slash commands are form-encoded fields.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import Role, TakeoverRequest, TakeoverStatus
from engine.ports import Clock
from tests.fakes.slack import FakeSlack
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import PEOPLE, wait_for
from tests.support.ids import SequentialIds

SECRET = "8f14e45fceea167a5a36dedd4bea2543"
TEAM = "T0SIGNOFF"
CHANNEL = "C0APPROVE"
USERS = {"alice": "U0ALICE01", "bob": "U0BOB0001", "carol": "U0CAROL01", "dave": "U0DAVE001"}
NO_BACKGROUND_SWEEP = 3600.0


def signature(body: str, timestamp: int | str, secret: str = SECRET) -> str:
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(
    body: str, *, secret: str = SECRET, timestamp: int | None = None
) -> dict[str, str]:
    ts = int(time.time()) if timestamp is None else timestamp
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": signature(body, ts, secret),
    }


def slack_config(slack: FakeSlack, secret: str = SECRET) -> str:
    return (
        f"slack: {{botToken: '{slack.token}', signingSecret: '{secret}', "
        f"apiBaseUrl: '{slack.api_url}'}}\n"
    )


def block_actions_payload(
    user: str,
    action_id: str,
    value: str,
    *,
    channel: str,
    message_ts: str,
    response_url: str,
    trigger_id: str,
    team: str = TEAM,
) -> dict[str, Any]:
    """A click on a card button in ``channel`` of workspace ``team`` (a ``block_actions``
    payload), as Slack sends it over HTTP or in a Socket Mode envelope."""
    return {
        "type": "block_actions",
        "team": {"id": team, "domain": "signoff-test" if team == TEAM else team.lower()},
        "user": {"id": user, "username": user.lower(), "team_id": team},
        "api_app_id": "A0SIGNOFF",
        "token": "unused-verification-token",
        "trigger_id": trigger_id,
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "channel": {"id": channel, "name": "approvals"},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "actions",
                "value": value,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def block_actions(user: str, action_id: str, value: str, **kw: Any) -> str:
    """``block_actions_payload`` form-encoded as Slack posts it; sign it with
    ``signed_headers``."""
    return urlencode({"payload": json.dumps(block_actions_payload(user, action_id, value, **kw))})


def deny_submission(
    user: str, request_id: str, reason: str | None, trigger_id: str
) -> dict[str, Any]:
    """The deny dialog submitted with ``reason`` (a ``view_submission`` payload)."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "signoff-test"},
        "user": {"id": user, "team_id": TEAM},
        "api_app_id": "A0SIGNOFF",
        "trigger_id": trigger_id,
        "view": {
            "id": "V0DENY",
            "type": "modal",
            "callback_id": "signoff_deny_reason",
            "private_metadata": request_id,
            "state": {
                "values": {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}
            },
        },
    }


@dataclass
class SlackHarness:
    api: Api
    slack: FakeSlack
    responses: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def engine(self) -> Any:
        return self.api.engine

    async def send(self, body: str, headers: dict[str, str]) -> tuple[int, str]:
        resp = await self.api.client.post("/slack/events", data=body, headers=headers)
        return resp.status, await resp.text()

    async def send_signed(self, body: str, **sign: Any) -> tuple[int, str]:
        return await self.send(body, signed_headers(body, **sign))

    def action_body(
        self,
        user: str,
        action_id: str,
        value: str,
        *,
        message_ts: str = "0.0",
        response_key: object = None,
    ) -> tuple[str, str]:
        """A ``block_actions`` payload as Slack sends it; returns (body, response key)."""
        key = str(response_key if response_key is not None else next(self.responses))
        body = block_actions(
            user,
            action_id,
            value,
            channel=CHANNEL,
            message_ts=message_ts,
            response_url=self.slack.response_url(key),
            trigger_id=self.slack.trigger(),
        )
        return body, key

    async def click(self, user: str, action_id: str, value: str, **kw: Any) -> tuple[int, str]:
        """Click a button; returns (HTTP status, response key of this click)."""
        body, key = self.action_body(user, action_id, value, **kw)
        status, _ = await self.send_signed(body)
        return status, key

    async def submit_deny(self, user: str, request_id: str, reason: str | None) -> tuple[int, Any]:
        payload = deny_submission(user, request_id, reason, self.slack.trigger())
        status, text = await self.send_signed(urlencode({"payload": json.dumps(payload)}))
        return status, json.loads(text) if text.startswith("{") else text

    async def command(self, user: str, text: str) -> tuple[int, Any, str]:
        """``/signoff <text>``; returns (status, the acknowledgement body, response key)."""
        key = str(next(self.responses))
        body = urlencode(
            {
                "token": "unused-verification-token",
                "team_id": TEAM,
                "team_domain": "signoff-test",
                "channel_id": CHANNEL,
                "channel_name": "approvals",
                "user_id": user,
                "user_name": user.lower(),
                "command": "/signoff",
                "text": text,
                "api_app_id": "A0SIGNOFF",
                "response_url": self.slack.response_url(key),
                "trigger_id": self.slack.trigger(),
            }
        )
        status, raw = await self.send_signed(body)
        return status, json.loads(raw) if raw.startswith("{") else raw, key

    def told(self, key: str) -> list[str]:
        """The ephemeral texts sent to one click's ``response_url``."""
        return [r.body.get("text", "") for r in self.slack.responses if r.key == key]

    async def wait_told(self, key: str) -> str:
        async def check() -> list[str]:
            return self.told(key)

        return str((await wait_for(check))[0])

    async def request_of(
        self, run_id: str, status: TakeoverStatus | None = None
    ) -> TakeoverRequest:
        async def check() -> TakeoverRequest | None:
            found = await self.engine.store.list_takeovers(run_id=run_id)
            found = [r for r in found if status is None or r.status == status]
            return found[-1] if found else None

        result: TakeoverRequest = await wait_for(check)
        return result

    async def start(self, workflow: str, input: dict[str, Any]) -> str:
        status, run = await self.api.call(
            "POST", "/v1/runs", as_="agent", json={"workflow": workflow, "input": input}
        )
        assert status == 201, run
        return str(run["id"])


def config_text(
    db_url: str, slack: FakeSlack, workflows: str, *, people: str = PEOPLE, extra: str = ""
) -> str:
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 8, leaseSeconds: 30, pollSeconds: 0.05, "
        "publicUrl: 'http://signoff.test'}\n"
        + slack_config(slack)
        + textwrap.dedent(people)
        + textwrap.dedent(extra)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(workflows), "  ")
    )


@asynccontextmanager
async def running_slack(
    db_url: str,
    workflows: str,
    *,
    people: str = PEOPLE,
    extra: str = "",
    rate: int | None = None,
    window: float = 1.0,
    min_interval: float = 0.0,
    clock: Clock | None = None,
    sweep_interval_seconds: float = NO_BACKGROUND_SWEEP,
    tokens: bool = True,
) -> AsyncIterator[SlackHarness]:
    """The real app (REST API, the bolt endpoint, workers, dispatcher) on a loopback port, with
    Slack's Web API on a ``FakeSlack``. Tokens: ``agent``, ``admin`` (alice); ``tokens=False``
    for a second app on a database that has them."""
    async with FakeSlack(rate=rate, window=window) as slack:
        for name, user_id in USERS.items():  # the workspace's members (views.publish, users.*)
            slack.add_user(user_id, f"{name}@example.com")
        text = config_text(db_url, slack, workflows, people=people, extra=extra)
        options = EngineOptions(
            clock=clock or ManualClock(),
            ids=SequentialIds("id"),
            owner="slack-test",
            sweep_interval_seconds=sweep_interval_seconds,
        )
        app = create_app(parse_config(text, {}), options)
        client = TestClient(TestServer(app))
        await client.start_server()
        api = Api(client, app[ENGINE], {})
        api.engine.dispatcher.sinks["slack"].min_interval = min_interval
        if tokens:
            await api.token("agent", Role.AGENT)
            await api.token("admin", Role.ADMIN, "alice")
        try:
            yield SlackHarness(api, slack)
            # Signoff never reads a conversation: Slack allows apps outside its Marketplace
            # one conversations.history / replies request a minute.
            assert slack.history_reads() == [], slack.history_reads()
        finally:
            await client.close()
