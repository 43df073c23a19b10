"""Admin commands as messages to the bot: the Slack slash command's grammar through the one
shared parser (``engine.gate.commands``), admins only for changes, audited, confirmed in the
conversation where they were typed."""

from __future__ import annotations

import pytest
from teamsharness import CHANNEL, FLOW, Teams, aad, running_teams, texts

from engine.gate.settings import Scope


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW) as t:
        await t.install()
        yield t


async def said(teams: Teams, text: str, *, as_: str, **where: str) -> str:
    """Send ``text`` and return the bot's reply (a card of text lines)."""
    before = len(teams.connector.posts())
    status, _ = await teams.say(text, as_=as_, **where)
    assert status == 200
    await teams.connector.wait_for(lambda c: len(c.posts()) > before)
    (reply,) = teams.connector.posts()[before:]
    return texts(reply.card)


async def test_an_admin_changes_the_gate_and_it_is_audited(teams: Teams):
    reply = await said(teams, "gate threshold 0.8", as_="alice")
    assert "Gate threshold set to 0.8 by alice" in reply

    status = await teams.engine.gate.status()
    (override,) = status.overrides
    assert (override.setting, override.value, override.updated_by) == ("threshold", 0.8, "alice")
    assert override.scope == Scope.GLOBAL

    reply = await said(teams, "gate threshold 0.5 agent=support-bot", as_="alice")
    assert "for agent support-bot" in reply
    assert "already" in await said(teams, "gate threshold 0.8", as_="alice")


async def test_others_may_read_but_not_change(teams: Teams):
    reply = await said(teams, "gate threshold 0.1", as_="bob")
    assert "Only an admin" in reply and "nothing changed" in reply
    assert (await teams.engine.gate.status()).overrides == ()

    reply = await said(teams, "gate status", as_="bob")  # reading is harmless: anyone known
    assert "Confidence gate: OFF" in reply and "threshold 0.75" in reply
    reply = await said(teams, "gate status", as_="alice")
    assert "Confidence gate: OFF" in reply and "threshold 0.75" in reply
    assert "gate threshold <0..1>" in await said(teams, "help", as_="bob")


async def test_bad_commands_get_the_usage_line_and_change_nothing(teams: Teams):
    reply = await said(teams, "gate threshold 2", as_="alice")
    assert "the threshold must be a number from 0 to 1" in reply and "Usage:" in reply
    assert "unknown command 'frobnicate'" in await said(teams, "frobnicate", as_="alice")
    assert (await teams.engine.gate.status()).overrides == ()


async def test_strangers_are_told_who_to_ask(teams: Teams):
    reply = await said(teams, "gate on", as_="stranger")
    assert "I don't know you yet" in reply and aad("stranger") in reply
    assert (await teams.engine.gate.status()).overrides == ()


async def test_a_personal_chat_needs_no_mention_and_html_is_read_as_text(teams: Teams):
    chat = "a:1Xk3PersonalChatWithAlice"
    await teams.install(chat, kind="personal", by="alice")
    reply = await said(teams, "gate&nbsp;on", as_="alice", conversation=chat, kind="personal")
    assert "Gate enabled set to on by alice" in reply
    assert teams.connector.posts(chat)[-1].conversation == chat
    assert teams.connector.posts(CHANNEL) == []
