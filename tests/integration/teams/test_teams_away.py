"""The away words as messages to the Teams bot (``bot.away``, shared with Slack's ``/signoff
away``): bob sets his absence with alice deciding for him, the card of a request for finance
says so, alice's click decides as bob's seat (not as an admin override), and bob ends it."""

from __future__ import annotations

from teamsharness import (
    CHANNEL,
    FLOW,
    Teams,
    card_posted,
    running_teams,
    start_run,
    subscribed,
    texts,
)

from engine.domain.model import JournalEvent, RunStatus
from tests.support.engines import wait_status


async def said_in(teams: Teams, text: str, *, as_: str, conversation: str = CHANNEL) -> str:
    """``text`` said in ``conversation`` (a personal chat, or the channel), and the bot's reply
    there: only that conversation's posts are counted (the channel's notices go on)."""
    before = len(teams.connector.posts(conversation))
    kind = "channel" if conversation == CHANNEL else "personal"
    status, _ = await teams.say(text, as_=as_, conversation=conversation, kind=kind)
    assert status == 200
    await teams.connector.wait_for(lambda c: len(c.posts(conversation)) > before)
    (reply,) = teams.connector.posts(conversation)[before:]
    return texts(reply.card)


async def test_away_set_shown_used_and_ended_through_teams(migrated_db_url: str) -> None:
    async with running_teams(migrated_db_url, FLOW) as teams:
        await subscribed(teams)
        reply = await said_in(teams, "away until 2026-01-05 delegate alice", as_="bob")
        assert reply.startswith("You're away until 2026-01-05 00:00 UTC: alice decides for you")
        reply = await said_in(teams, "away", as_="bob")
        assert reply.startswith("You're away until 2026-01-05 00:00 UTC: alice decides for you.")

        run_id = await start_run(teams)
        request_id, _ = await card_posted(teams, run_id)
        card = [p for p in teams.connector.posts(CHANNEL) if p.card is not None][-1].card
        assert "alice decides for bob, who is away" in texts(card)
        request = await teams.engine.store.get_takeover(request_id)
        assert request.approvers[-1] == "alice"

        status, _ = await teams.click("grant", request_id, as_="alice")
        assert status == 200
        await wait_status(teams.engine, run_id, RunStatus.COMPLETED)
        journal = await teams.engine.store.journal(run_id)
        [granted] = [e.data for e in journal if e.event == JournalEvent.TAKEOVER_GRANTED]
        assert granted["by"] == "alice" and granted["for"] == "bob"
        assert "override" not in granted  # she decided as bob's delegate, not as an admin

        # The rest in personal chats: the run's notices go on in the channel meanwhile.
        bobs, carols = "a:1BobsPersonalChat", "a:1CarolsPersonalChat"
        await teams.install(bobs, kind="personal", by="bob")
        await teams.install(carols, kind="personal", by="carol")
        reply = await said_in(teams, "away off", as_="bob", conversation=bobs)
        assert reply.startswith("Welcome back")
        mention = "away until 2026-01-05 delegate <at>Alice</at>"
        reply = await said_in(teams, mention, as_="carol", conversation=carols)
        assert reply.startswith("Usage: away until")  # a mention is no name: nothing changed
        reply = await said_in(
            teams, "away until 2026-01-05 delegate nobody", as_="carol", conversation=carols
        )
        assert "doesn't know who nobody is" in reply
        assert await teams.engine.store.absences(teams.engine.clock.now()) == []
