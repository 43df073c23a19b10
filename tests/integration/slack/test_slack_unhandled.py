"""Every signed Slack request is acknowledged, whether or not Signoff handles it.

Slack sends what the app subscribed to or what a person did: a ``reaction_added`` or
``message`` event, a click on a button an older card still shows (an ``action_id`` this version
does not know), a modal closed with its close button (``view_closed``), a shortcut. bolt
answers those 404 when no listener takes them; Slack then retries the event and, for an app
that keeps failing, turns event delivery off. They get an empty 200 and change nothing; an
unsigned one is still a 401, and a listener registered for one of them (later, by another
module) still wins.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

from bot.slack import BOLT
from tests.integration.slack.harness import (
    CHANNEL,
    TEAM,
    USERS,
    SlackHarness,
    running_slack,
    signed_headers,
)
from tests.integration.slack.test_slack_clicks import FLOWS, pending_request
from tests.support.engines import wait_for, wait_status
from tests.support.waiting import quiet

JSON = {"Content-Type": "application/json"}


def event(event_id: str, inner: dict[str, Any]) -> str:
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": TEAM,
            "api_app_id": "A0SIGNOFF",
            "event_id": event_id,
            "event_time": int(time.time()),
            "event": inner,
        }
    )


def reaction(event_id: str) -> str:
    """An event Signoff does not handle (no Signoff listener takes ``reaction_added``)."""
    return event(
        event_id,
        {
            "type": "reaction_added",
            "user": USERS["bob"],
            "reaction": "thumbsup",
            "item": {"type": "message", "channel": "C0ELSEWHERE", "ts": "1700000000.000100"},
        },
    )


def channel_message(event_id: str) -> str:
    return event(
        event_id,
        {
            "type": "message",
            "user": USERS["bob"],
            "text": "approve it please",
            "channel": CHANNEL,
            "ts": "1700000002.000100",
            "channel_type": "channel",
        },
    )


def view_closed() -> str:
    payload = {
        "type": "view_closed",
        "team": {"id": TEAM, "domain": "signoff-test"},
        "user": {"id": USERS["bob"], "team_id": TEAM},
        "api_app_id": "A0SIGNOFF",
        "view": {"id": "V0DENY", "type": "modal", "callback_id": "signoff_deny_reason"},
        "is_cleared": False,
    }
    return urlencode({"payload": json.dumps(payload)})


def shortcut() -> str:
    """A global shortcut (from the lightning menu), which Signoff's manifest declares none of;
    a ``block_suggestion`` or ``message_action`` is the same case: a type Signoff does not take."""
    payload = {
        "type": "shortcut",
        "team": {"id": TEAM, "domain": "signoff-test"},
        "user": {"id": USERS["bob"], "team_id": TEAM},
        "api_app_id": "A0SIGNOFF",
        "callback_id": "signoff_anything",
        "trigger_id": "1.2.3",
    }
    return urlencode({"payload": json.dumps(payload)})


async def snapshot(h: SlackHarness, run_id: str) -> tuple[Any, ...]:
    journal = await h.engine.store.journal(run_id)
    outbox = await h.engine.queries.outbox_messages(run_id=run_id)
    requests = await h.engine.store.list_takeovers(run_id=run_id)
    return (
        [(e.seq, e.event) for e in journal],
        sorted(map(repr, outbox)),
        [(r.id, r.status) for r in requests],
    )


async def test_signed_requests_no_listener_takes_get_200_and_change_nothing(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id, request_id = await pending_request(h)
        await wait_status(h.engine, run_id, "waiting")

        async def card_posted() -> list:
            return h.slack.posted(CHANNEL)

        async def homes_published() -> bool:  # after the card: its approvers' Home tabs
            return all(USERS[p] in h.slack.homes for p in ("alice", "bob", "carol"))

        await wait_for(card_posted)
        await wait_for(homes_published)
        await quiet(0.2)  # nothing more follows the card
        before, calls = await snapshot(h, run_id), len(h.slack.calls)

        unknown_click, key = h.action_body(USERS["bob"], "signoff_frobnicate", request_id)
        sent = [
            (reaction("Ev0HOME01"), JSON),
            (channel_message("Ev0MSG001"), JSON),
            (unknown_click, {}),
            (view_closed(), {}),
            (shortcut(), {}),
        ]
        for body, extra in sent:
            headers = {**signed_headers(body), **extra}
            assert await h.send(body, headers) == (200, ""), body[:80]
            # The same bytes unsigned, or signed with another secret: refused as before.
            unsigned = {k: v for k, v in headers.items() if k != "X-Slack-Signature"}
            assert (await h.send(body, unsigned))[0] == 401
            forged = {**signed_headers(body, secret="0" * 32), **extra}
            assert (await h.send(body, forged))[0] == 401

        await quiet(0.3)  # a follow-up, had one been started, has reached the fake
        assert await snapshot(h, run_id) == before
        assert len(h.slack.calls) == calls and h.told(key) == []


async def test_a_listener_for_an_event_still_wins_over_the_acknowledgement(
    migrated_db_url: str,
) -> None:
    """A module that handles ``reaction_added`` (registered after Signoff's own listeners)
    gets the event; the blanket acknowledgement is only for what nobody takes."""
    async with running_slack(migrated_db_url, FLOWS) as h:
        seen: list[str] = []

        async def on_home(ack: Any, event: dict[str, Any]) -> None:
            seen.append(event["user"])
            await ack()

        h.api.client.server.app[BOLT].event("reaction_added")(on_home)
        body = reaction("Ev0HOME02")
        assert (await h.send(body, {**signed_headers(body), **JSON}))[0] == 200
        assert seen == [USERS["bob"]]


async def test_a_listener_that_fails_is_still_a_500_not_an_acknowledgement(
    migrated_db_url: str, caplog: Any
) -> None:
    """Only what no listener takes is acknowledged: a listener's crash is not hidden."""
    async with running_slack(migrated_db_url, FLOWS) as h:

        async def broken(event: dict[str, Any]) -> None:
            raise RuntimeError("the listener broke")

        h.api.client.server.app[BOLT].event("reaction_added")(broken)
        body = reaction("Ev0HOME03")
        assert (await h.send(body, {**signed_headers(body), **JSON}))[0] == 500
        assert "handling a Slack request failed: the listener broke" in caplog.text
