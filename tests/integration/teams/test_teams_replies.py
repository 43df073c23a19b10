"""A command's confirmation goes through the outbox like a card: when the conversation's rate
budget is used up it is delayed, never lost (it used to be sent inline and dropped on a 429,
or when the pace would have held the turn more than a few seconds: the change applied, and
nobody was told)."""

from __future__ import annotations

import aiohttp
import pytest
from teamsharness import CHANNEL, FLOW, Teams, running_teams, texts

from tests.fakes.teams import FakeConnector
from tests.support.waiting import within


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW) as t:
        await t.install()
        yield t


async def use_up_the_budget(connector: FakeConnector, conversation: str) -> None:
    """What another replica of the bot posting into ``conversation`` does: post until the
    connector answers 429 (7 per second, 8 per 2 s, PLATFORM.md)."""
    url = f"{connector.service_url}v3/conversations/{conversation}/activities"
    async with aiohttp.ClientSession() as session:
        for _ in range(9):
            async with session.post(url, json={"type": "message", "text": "busy"}) as resp:
                if resp.status == 429:
                    return
    raise AssertionError("the fake connector never said 429")


async def test_a_confirmation_beyond_the_rate_budget_is_delayed_not_lost(teams: Teams):
    await use_up_the_budget(teams.connector, CHANNEL)
    before = len(teams.connector.posts())
    status, _ = await teams.say("gate on", as_="alice")
    assert status == 200
    (override,) = (await teams.engine.gate.status()).overrides  # the change applied at once
    assert (override.setting, override.updated_by) == ("enabled", "alice")

    # The reply is refused (429, Retry-After) and retried when that time has passed, on the
    # engine's clock and on the connector's.
    replies = []
    for _ in range(60):
        replies = await within(lambda: teams.connector.posts()[before:], 0.1)
        if replies:
            break
        teams.clock.advance(seconds=1)
        teams.engine.wake_outbox()
    (reply,) = replies
    assert "Gate enabled set to on by alice" in texts(reply.card)
    assert reply.conversation == CHANNEL and reply.thread is not None  # in the message's thread
    assert ("send", CHANNEL) in teams.connector.throttled

    async def sent():
        rows = await teams.engine.store.outbox_messages(status="sent")
        return [m for m, _, _ in rows if m.kind == "reply"]

    # The post reaches the connector a moment before its row is marked sent.
    await within(sent, 5)
    assert len(await sent()) == 1


async def test_a_burst_of_commands_gets_every_confirmation_in_order(teams: Teams):
    # Fifteen commands at once: more than 8 replies per 2 s, so some wait their turn.
    values = [round(0.5 + i / 100, 2) for i in range(1, 16)]
    for value in values:
        status, _ = await teams.say(f"gate threshold {value}", as_="alice")
        assert status == 200
    await teams.connector.wait_for(lambda c: len(c.posts(CHANNEL)) == len(values), timeout=20)
    got = [texts(c.card) for c in teams.connector.posts(CHANNEL)]
    assert all(f"set to {v} " in g for v, g in zip(values, got, strict=True)), got
    assert teams.connector.throttled == []  # paced, never over a limit
