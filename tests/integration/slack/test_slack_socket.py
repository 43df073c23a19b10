"""Slack over Socket Mode, end to end: the real app connects to a fake Slack's WebSocket
(``tests/fakes/slack_socket.py``) and takes events, clicks, modals and commands through it.

The connection is opened with the app-level token at ``slack.apiBaseUrl``; every envelope is
answered with its ``envelope_id`` (a slash command's reply and a modal's errors as its payload);
a dropped socket and a ``disconnect`` are followed by a new ``apps.connections.open``; an
envelope Slack sends again (``retry_attempt``) acts once. A run parks, its card is posted to
the fake Web API, Approve arrives over the socket, the run resumes once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bot.app import create_app
from bot.keys import ENGINE
from bot.slack import SOCKET
from engine.assembly import EngineOptions
from engine.config import parse_config
from engine.domain.model import JournalEvent, Role, RunStatus, TakeoverStatus
from tests.fakes.slack_socket import FakeSlackSocket
from tests.integration.slack.harness import (
    CHANNEL,
    TEAM,
    USERS,
    SlackHarness,
    block_actions_payload,
    deny_submission,
)
from tests.integration.slack.test_slack_clicks import FLOWS
from tests.support.api import Api
from tests.support.clock import ManualClock
from tests.support.engines import PEOPLE, wait_for, wait_status
from tests.support.ids import SequentialIds
from tests.support.process import Server, free_port
from tests.support.waiting import quiet, until


def socket_config(db_url: str, slack: FakeSlackSocket) -> str:
    return (
        f"database: {{url: '{db_url}'}}\n"
        "server: {workers: 8, leaseSeconds: 30, pollSeconds: 0.05, "
        "publicUrl: 'http://signoff.test'}\n"
        f"slack: {{botToken: '{slack.token}', socketMode: true, appToken: '{slack.app_token}', "
        f"apiBaseUrl: '{slack.api_url}'}}\n" + PEOPLE + "workflows:\n" + _indent(FLOWS)
    )


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.strip("\n").splitlines())


@asynccontextmanager
async def running_socket(db_url: str, **fake: Any) -> AsyncIterator[SlackHarness]:
    """The real app in Socket Mode against a ``FakeSlackSocket``, connected."""
    async with FakeSlackSocket(**fake) as slack:
        options = EngineOptions(clock=ManualClock(), ids=SequentialIds("id"), owner="socket")
        app = create_app(parse_config(socket_config(db_url, slack), {}), options)
        app[SOCKET].ping_seconds = 1.0  # a cut socket is noticed within seconds, not 10
        client = TestClient(TestServer(app))
        await client.start_server()
        api = Api(client, app[ENGINE], {})
        await api.token("agent", Role.AGENT)
        try:
            await slack.connected(1)
            yield SlackHarness(api, slack)
        finally:
            await client.close()
        # The app's shutdown closed its socket; the fake saw nothing Slack would refuse.
        await until(lambda: slack.open_sockets == 0, what="the socket closed at shutdown")
    assert slack.socket_violations == []


def click(h: SlackHarness, user: str, action_id: str, value: str, key: str) -> dict[str, Any]:
    """A ``block_actions`` payload, as an ``interactive`` envelope carries it."""
    return block_actions_payload(
        user,
        action_id,
        value,
        channel=CHANNEL,
        message_ts="0.0",
        response_url=h.slack.response_url(key),
        trigger_id=h.slack.trigger(),
    )


def command(h: SlackHarness, user: str, text: str) -> dict[str, Any]:
    return command_fields(user, text, h.slack.response_url("command"), h.slack.trigger())


def command_fields(
    user: str, text: str, response_url: str = "", trigger_id: str = "1.2.3"
) -> dict[str, Any]:
    return {
        "token": "unused-verification-token",
        "team_id": TEAM,
        "channel_id": CHANNEL,
        "user_id": user,
        "command": "/signoff",
        "text": text,
        "api_app_id": "A0SIGNOFF",
        "response_url": response_url,
        "trigger_id": trigger_id,
        "is_enterprise_install": False,  # JSON here, where HTTP has form text
    }


def event(event_id: str, inner: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "event_callback",
        "team_id": TEAM,
        "api_app_id": "A0SIGNOFF",
        "event_id": event_id,
        "event_time": int(time.time()),
        "event": inner,
    }


async def parked(h: SlackHarness, order: str) -> tuple[str, str]:
    """A run waiting at its approval, its card posted to the channel; (run id, request id)."""
    run_id = await h.start("refund", {"order": order})
    request = await h.request_of(run_id)
    await wait_status(h.engine, run_id, RunStatus.WAITING)

    async def card() -> list:
        return [m for m in h.slack.posted(CHANNEL) if order in json.dumps(m.blocks)]

    await wait_for(card)
    return run_id, request.id


async def test_a_click_over_the_socket_resumes_the_run_once_across_drops(
    migrated_db_url: str,
) -> None:
    async with running_socket(migrated_db_url) as h:
        slack = h.slack
        opens = slack.calls_of("apps.connections.open")
        assert len(opens) == 1 and opens[0].status == 200 and opens[0].error is None
        # No HTTP endpoint in Socket Mode: nothing to sign, nothing to forge.
        assert (await h.api.client.post("/slack/events", data="{}")).status == 404

        run_id, request_id = await parked(h, "S-1")

        # The socket is closed, cut, then refreshed: each time the client comes back through a
        # new apps.connections.open (its one-use URL cannot be reused).
        for lose in (slack.drop, partial(slack.drop, abrupt=True), slack.refresh):
            opened = len(slack.opened)
            await lose()
            await slack.connected(opened + 1)
            assert len(slack.opened) > opened

        envelope = await slack.send(
            "interactive", click(h, USERS["bob"], "signoff_grant", request_id, "approve")
        )
        ack = await slack.ack(envelope)
        assert ack.connection >= 4 and ack.payload is None
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        journal = await h.engine.store.journal(run_id)

        # Slack saw no answer (say the socket died with it) and sends the click again.
        again = await slack.redeliver(envelope)
        assert (await slack.ack(again)).payload is None
        await quiet(0.3)  # a second decision or reply, had one been started, has happened

        assert await h.engine.store.journal(run_id) == journal
        events = [e.event for e in journal]
        assert events.count(JournalEvent.TAKEOVER_RELEASED) == 1
        assert events.count(JournalEvent.RUN_RESUMED) == 1
        request = await h.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.RELEASED and request.decided_by == "bob"
        refunds = [
            e for e in await h.engine.store.ledger(run_id=run_id) if e["step_id"] == "refund"
        ]
        assert len(refunds) == 1
        assert h.told("approve") == []  # the winner is told nothing, the first time or again


async def test_commands_events_and_modals_over_the_socket(migrated_db_url: str) -> None:
    async with running_socket(migrated_db_url) as h:
        slack = h.slack
        # A slash command's answer is the payload of its acknowledgement.
        ack = await slack.ack(await slack.send("slash_commands", command(h, USERS["bob"], "help")))
        assert ack.payload is not None and "/signoff pending" in ack.payload["text"]
        assert ack.payload["response_type"] == "ephemeral"

        # An @mention is acknowledged at once and answered in its thread, once, though
        # Slack sends it again (retry_attempt 1).
        mention = event(
            "Ev0SOCKET1",
            {
                "type": "app_mention",
                "user": USERS["bob"],
                "text": "<@U0SIGNOFF> help?",
                "channel": CHANNEL,
                "ts": "1700000001.000200",
            },
        )
        first = await slack.send("events_api", mention)
        assert (await slack.ack(first)).payload is None
        await slack.ack(await slack.redeliver(first))

        async def replied() -> list:
            return slack.thread(CHANNEL, "1700000001.000200")

        await wait_for(replied)

        # An event nobody handles is acknowledged too (unanswered, Slack would send it again).
        home = event("Ev0SOCKET2", {"type": "app_home_opened", "user": USERS["bob"]})
        assert (await slack.ack(await slack.send("events_api", home))).payload is None

        # Deny: the button opens the modal (views.open with the click's trigger_id), the
        # submission denies; a second submission is answered with errors inside the modal.
        run_id, request_id = await parked(h, "S-2")
        await slack.ack(
            await slack.send("interactive", click(h, USERS["bob"], "signoff_deny", request_id, "d"))
        )

        async def modal() -> list:
            return slack.views

        (view,) = await wait_for(modal)
        assert view["private_metadata"] == request_id
        submitted = deny_submission(USERS["bob"], request_id, "not this one", h.slack.trigger())
        assert (await slack.ack(await slack.send("interactive", submitted))).payload is None
        await wait_status(h.engine, run_id, RunStatus.FAILED)
        late = deny_submission(USERS["carol"], request_id, "me too", h.slack.trigger())
        answer = (await slack.ack(await slack.send("interactive", late))).payload
        assert answer is not None and answer["response_action"] == "errors"
        assert "Already denied by bob" in answer["errors"]["reason"]

        await quiet(0.3)
        assert len(slack.thread(CHANNEL, "1700000001.000200")) == 1
        denied = await h.engine.store.get_takeover(request_id)
        assert denied.status == TakeoverStatus.DENIED and denied.decided_by == "bob"


async def test_a_malformed_envelope_is_acknowledged_and_does_nothing(
    migrated_db_url: str, caplog: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.slack")
    async with running_socket(migrated_db_url) as h:
        _, request_id = await parked(h, "S-3")
        bad = click(h, USERS["bob"], "signoff_grant", request_id, "bad")
        bad["actions"] = []
        assert (await h.slack.ack(await h.slack.send("interactive", bad))).payload is None
        await quiet(0.3)
        assert (await h.engine.store.get_takeover(request_id)).status == TakeoverStatus.PENDING
        assert "refused a Slack interactive envelope: block_actions needs actions" in caplog.text

        nul = command(h, USERS["alice"], "gate on\x00")
        assert (await h.slack.ack(await h.slack.send("slash_commands", nul))).payload is None
        settings = await h.engine.gate.settings.effective(None, None, fresh=True)
        assert not settings.enabled
        assert "refused a Slack slash_commands envelope" in caplog.text


async def test_the_fake_refuses_what_slack_refuses() -> None:
    """apps.connections.open takes only the app-level token; its URL connects once."""
    async with FakeSlackSocket() as slack, aiohttp.ClientSession() as http:

        async def open_with(token: str) -> dict[str, Any]:
            url = slack.api_url + "apps.connections.open"
            async with http.post(url, headers={"Authorization": f"Bearer {token}"}) as resp:
                return dict(await resp.json())

        assert (await open_with(slack.token))["error"] == "not_allowed_token_type"
        assert (await open_with("xapp-1-someone-else"))["error"] == "invalid_auth"
        opened = await open_with(slack.app_token)
        assert opened["ok"] and opened["url"].startswith("ws://127.0.0.1:")
        async with http.ws_connect(opened["url"]) as ws:
            hello = await ws.receive_json()
            assert hello["type"] == "hello"
            # An answer to an envelope never sent is what Slack would drop: recorded.
            await ws.send_json({"envelope_id": "not-sent"})
            await until(lambda: slack.socket_violations)
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await http.ws_connect(opened["url"])  # the URL's ticket was used
        assert len(slack.socket_violations) == 2
        slack.socket_violations.clear()


async def test_signoff_serve_connects_at_start_and_closes_at_sigterm(
    tmp_path: Path, db_url: str
) -> None:
    """The real ``signoff serve`` process: the socket opens with the app's start and is
    closed by its shutdown (SIGTERM), which exits 0 with no traceback in the log."""
    async with FakeSlackSocket() as slack:
        port = free_port()
        config = tmp_path / "app.yaml"
        config.write_text(
            f"database: {{url: '{db_url}'}}\n"
            f"server: {{host: 127.0.0.1, port: {port}, pollSeconds: 0.1}}\n"
            f"slack: {{botToken: '{slack.token}', socketMode: true, "
            f"appToken: '{slack.app_token}', apiBaseUrl: '{slack.api_url}'}}\n"
        )
        log = tmp_path / "server.log"
        server = Server(config, port, log, args=("--migrate",))
        await server.start()
        try:
            await slack.connected(1)
            help_ = await slack.send("slash_commands", command_fields("U0NOBODY1", "help"))
            assert "/signoff pending" in ((await slack.ack(help_)).payload or {})["text"]
        finally:
            assert await server.stop() == 0
        await until(lambda: slack.open_sockets == 0, what="the socket closed at SIGTERM")
        text = log.read_text()
        assert "Slack Socket Mode connected" in text and "Traceback" not in text, text
        assert slack.socket_violations == []
