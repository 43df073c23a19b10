"""A real Signoff server (real engine, real database, ``ManualClock``) with a fake Bot Connector
as the ``serviceUrl``, and activities built the way Teams sends them.

    async with running_teams(db_url, WORKFLOWS) as teams:
        await teams.install()                     # the bot is added to a team's channel
        await teams.say("subscribe ops", as_="alice")
        status, body = await teams.click("grant", request_id, as_="bob", card=activity_id)
"""

from __future__ import annotations

import itertools
import json
import os
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from engine.assembly import Engine, EngineOptions
from engine.config import parse_config
from engine.domain.model import Principal, Role, RunStatus
from tests.fakes.teams import FakeConnector
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status
from tests.support.ids import SequentialIds

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
BOT = {"id": "28:9f3c2b1a-0000-4000-8000-00000000b07", "name": "Signoff"}
TEAM = "19:Xk3kTeamGeneral0000000000000000@thread.tacv2"
CHANNEL = "19:9a7b3c1d2e4f40aa8bb1c2d3e4f5a6b7@thread.tacv2"
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
APPROVERS = USERS[1:]  # alice is the admin; the others decide

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "unit" / "cards" / "adaptive-card-1.5.json").read_text("utf-8")
)
VALIDATOR = jsonschema.Draft6Validator(SCHEMA)


def aad(name: str) -> str:
    return f"aad-{name}"


def people_yaml() -> str:
    lines = ["people:"]
    lines += [f"  {n}: {{email: {n}@example.com, teams: {aad(n)}}}" for n in USERS]
    lines += [f"  mallory: {{email: mallory@example.com, teams: {aad('mallory')}}}"]
    lines += ["groups:", f"  finance: [{', '.join(APPROVERS)}]", "admins: [alice]"]
    return "\n".join(lines) + "\n"


def assert_valid_card(card: dict[str, Any]) -> None:
    """Valid against the Adaptive Card 1.5 schema (the playground does not check this)."""
    errors = [e.message[:300] for e in VALIDATOR.iter_errors(card)]
    assert errors == [], errors


def texts(card: dict[str, Any]) -> str:
    """Every text on a card, joined: what a person reads."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("text", "title", "fallbackText"):
                if isinstance(node.get(key), str):
                    out.append(node[key])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(card)
    return " ".join(" ".join(out).split())


def verbs(card: dict[str, Any]) -> list[str]:
    """The Action.Execute verbs a card offers (the deny one sits inside its ShowCard)."""
    found: list[str] = []
    for action in card.get("actions", []):
        if action.get("type") == "Action.Execute":
            found.append(action["verb"])
        elif action.get("type") == "Action.ShowCard":
            found += [a["verb"] for a in action["card"].get("actions", [])]
    return found


@dataclass
class Teams:
    client: TestClient[Any, Any]
    engine: Engine
    connector: FakeConnector
    clock: ManualClock
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1_700_000_000_001))

    def _base(self, *, conversation: str, kind: str, user: str | None) -> dict[str, Any]:
        activity: dict[str, Any] = {
            "id": str(next(self._ids)),
            "channelId": "msteams",
            "serviceUrl": self.connector.service_url,
            "timestamp": "2026-01-01T12:00:00.000Z",
            "locale": "en-US",
            "recipient": dict(BOT),
            "conversation": {
                "id": conversation,
                "conversationType": kind,
                "tenantId": TENANT,
                **({"isGroup": True} if kind != "personal" else {}),
            },
            "channelData": {"tenant": {"id": TENANT}},
        }
        if user is not None:
            activity["from"] = {
                "id": f"29:1{user}-teams-user-id",
                "name": user.title(),
                "aadObjectId": aad(user),
            }
        if kind == "channel":
            activity["channelData"].update(
                teamsTeamId=TEAM,
                teamsChannelId=conversation.split(";")[0],
                team={"id": TEAM, "name": "Finance"},
                channel={"id": conversation.split(";")[0], "name": "approvals"},
            )
        return activity

    async def post(self, activity: dict[str, Any], **headers: str) -> tuple[int, Any]:
        return await self.post_raw(json.dumps(activity).encode(), **headers)

    async def post_raw(self, data: bytes, **headers: str) -> tuple[int, Any]:
        """POST ``data`` as it is (JSON no parser should accept, say)."""
        headers = {"Content-Type": "application/json", **headers}
        resp = await self.client.post("/api/messages", data=data, headers=headers)
        text = await resp.text()
        if resp.content_type != "application/json":
            return resp.status, text or None  # e.g. aiohttp's 404 for a route not mounted
        return resp.status, (json.loads(text) if text else None)

    async def install(
        self, conversation: str = CHANNEL, kind: str = "channel", by: str = "alice"
    ) -> None:
        """The bot is added: Teams sends conversationUpdate with the bot in membersAdded. In a
        personal chat the bot greets the person: this waits for the greeting, so that tests
        counting what the bot posts next do not count it."""
        activity = self._base(conversation=conversation, kind=kind, user=by)
        activity.update(type="conversationUpdate", membersAdded=[{"id": BOT["id"]}])
        activity["channelData"]["eventType"] = "teamMemberAdded" if kind == "channel" else None
        before = len(self.connector.posts(conversation))
        status, _ = await self.post(activity)
        assert status == 200
        if kind == "personal":
            await self.connector.wait_for(lambda c: len(c.posts(conversation)) > before)

    async def say(
        self, text: str, *, as_: str, conversation: str = CHANNEL, kind: str = "channel"
    ) -> tuple[int, Any]:
        """A message to the bot; in a channel it starts with the bot's @mention."""
        activity = self._base(conversation=conversation, kind=kind, user=as_)
        if kind == "channel":
            activity["conversation"]["id"] = f"{conversation};messageid={activity['id']}"
        mention = f"<at>{BOT['name']}</at>"
        activity.update(
            type="message",
            textFormat="plain",
            text=f"{mention} {text}" if kind != "personal" else text,
            entities=[
                {"type": "mention", "text": mention, "mentioned": dict(BOT)},
                {"type": "clientInfo", "locale": "en-US", "country": "US", "platform": "Web"},
            ]
            if kind != "personal"
            else [{"type": "clientInfo", "locale": "en-US"}],
        )
        return await self.post(activity)

    def click_activity(
        self,
        verb: str,
        request_id: str,
        *,
        as_: str,
        card: str | None = None,
        conversation: str = CHANNEL,
        kind: str = "channel",
        **data: Any,
    ) -> dict[str, Any]:
        """The ``adaptiveCard/action`` invoke Teams sends for an ``Action.Execute`` click."""
        activity = self._base(conversation=conversation, kind=kind, user=as_)
        activity.update(
            type="invoke",
            name="adaptiveCard/action",
            value={
                "action": {
                    "type": "Action.Execute",
                    "id": f"{verb}-button",
                    "verb": verb,
                    "data": {"requestId": request_id, **data},
                },
                "trigger": "manual",
            },
        )
        if card is not None:
            activity["replyToId"] = card
        return activity

    async def click(self, verb: str, request_id: str, **kwargs: Any) -> tuple[int, Any]:
        return await self.post(self.click_activity(verb, request_id, **kwargs))


FLOW = """
refund:
  nodes:
    - {id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {order: "{{ input.order }}"}}
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       approvers: [finance], channels: [teams:ops], timeoutMinutes: 30, onDeny: refused}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}, next: end}
    - {id: refused, type: connector, connector: demo-ledger, action: note,
       args: {text: "refund refused"}}
"""
ARGS = {"order": "A-17", "amount": 420}


async def start_run(teams: Teams, **input: object) -> str:
    agent = Principal(name="token:agent", role=Role.AGENT, token="agent")
    run, _ = await teams.engine.runs.start_run("refund", {**ARGS, **input}, agent)
    return run.id


async def subscribed(teams: Teams) -> None:
    """The bot installed in CHANNEL, named teams:ops, and its confirmation posted (replies go
    through the outbox: waiting for it keeps it out of what the test then counts)."""
    await teams.install()
    before = len(teams.connector.posts())
    status, _ = await teams.say("subscribe ops", as_="alice")
    assert status == 200
    await teams.connector.wait_for(lambda c: len(c.posts()) > before)


async def card_posted(teams: Teams, run_id: str) -> tuple[str, str]:
    """Wait for the run's card; returns (request id, card activity id)."""
    await wait_status(teams.engine, run_id, RunStatus.WAITING)
    (request,) = await teams.engine.store.list_takeovers(run_id=run_id)

    async def stored():
        return await teams.engine.store.chat_messages(request_id=request.id, kind="card")

    (message,) = await wait_for(stored)
    return request.id, message.message_ref


# The tests send unsigned activities, as the Agents Playground does: they must say so.
UNSIGNED = "teams: {insecureLocalDev: true}\n"


def config_text(db_url: str, workflows_yaml: str, extra: str = "", *, teams: str = UNSIGNED) -> str:
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 8, leaseSeconds: 30, pollSeconds: 0.05, "
        "publicUrl: 'http://signoff.test'}\n"
        + people_yaml()
        + teams
        + textwrap.dedent(extra)
        + "workflows:\n"
        + textwrap.indent(textwrap.dedent(workflows_yaml), "  ")
    )


@asynccontextmanager
async def running_teams(
    db_url: str,
    workflows_yaml: str,
    *,
    extra: str = "",
    teams: str = UNSIGNED,
    connector: FakeConnector | None = None,
    sweep_interval_seconds: float = 3600.0,
) -> AsyncIterator[Teams]:
    clock = ManualClock()
    # The proxy variables the test set for the process are the deployment's environment.
    env = {name: value for name, value in os.environ.items() if name.lower().endswith("_proxy")}
    config = parse_config(config_text(db_url, workflows_yaml, extra, teams=teams), env)
    options = EngineOptions(
        clock=clock,
        ids=SequentialIds("id"),
        owner="teams-test",
        sweep_interval_seconds=sweep_interval_seconds,
    )
    async with connector or FakeConnector() as fake:
        app = create_app(config, options)
        client = TestClient(TestServer(app))
        await client.start_server()
        try:
            yield Teams(client, app[ENGINE], fake, clock)
        finally:
            await client.close()
