"""A person's 1:1 chat with the bot (``bot.teams.personal``), with activities as Teams sends
them and the fake Bot Connector: installing the bot there stores the chat as the person's and
greets them once; "pending" lists what they may decide as cards that decide like any other; a
``teams:@<group>`` address sends each approver their own copy, and a decision updates them all.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from teamsharness import (
    BOT,
    CHANNEL,
    Teams,
    aad,
    assert_valid_card,
    running_teams,
    subscribed,
    texts,
    verbs,
)

from engine.domain.model import Principal, Role, RunStatus
from tests.fakes.teams import FakeConnector
from tests.support.engines import wait_for, wait_status

WORKFLOWS = """
refund:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.amount }} for {{ input.order }}",
       approvers: [finance], channels: [teams:ops], timeoutMinutes: 30}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}, next: end}
audit:
  nodes:
    - {id: approve, type: approval, reason: "Audit {{ input.order }}", approvers: [carol],
       channels: [teams:ops], timeoutMinutes: 30}
direct:
  nodes:
    - {id: approve, type: approval, reason: "Direct {{ input.order }}", approvers: [finance],
       channels: ["teams:@finance"], timeoutMinutes: 30}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}, next: end}
reminded:
  nodes:
    - {id: approve, type: approval, reason: "Remind {{ input.order }}", approvers: [bob, carol],
       channels: ["teams:@bob", "teams:@carol"], timeoutMinutes: 30, remindBeforeMinutes: 10}
each:
  nodes:
    - {id: approve, type: approval, reason: "Each {{ input.order }}", approvers: [bob, carol],
       channels: ["teams:dm"], timeoutMinutes: 30}
two:
  nodes:
    - {id: approve, type: approval, reason: "Two of {{ input.order }}", approvers: [finance],
       approvalsRequired: 2, channels: [teams:ops], timeoutMinutes: 30}
"""
AGENT = Principal(name="token:agent", role=Role.AGENT, token="agent")


def chat_of(name: str) -> str:
    return f"a:1{name}-personal-chat"


async def start(teams: Teams, workflow: str, order: str) -> str:
    run, _ = await teams.engine.runs.start_run(workflow, {"order": order, "amount": 5}, AGENT)
    await wait_status(teams.engine, run.id, RunStatus.WAITING)
    (request,) = await teams.engine.store.list_takeovers(run_id=run.id)
    return request.id


async def pending(teams: Teams, name: str, cards: int) -> list[Any]:
    """``name`` writes pending in their chat; returns the posts that answer (a line + cards)."""
    chat = chat_of(name)
    before = len(teams.connector.posts(chat))
    status, _ = await teams.say("pending", as_=name, conversation=chat, kind="personal")
    assert status == 200
    await teams.connector.wait_for(lambda c: len(c.posts(chat)) >= before + 1 + cards)
    return teams.connector.posts(chat)[before:]


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, WORKFLOWS) as t:
        await subscribed(t)
        yield t


async def test_a_personal_install_stores_the_chat_and_greets_once(teams: Teams):
    chat = chat_of("bob")
    update = teams._base(conversation=chat, kind="personal", user="bob")
    update.update(type="conversationUpdate", membersAdded=[{"id": BOT["id"]}])
    install = teams._base(conversation=chat, kind="personal", user="bob")
    install.update(type="installationUpdate", action="add")
    answers = await asyncio.gather(teams.post(update), teams.post(install), teams.post(update))
    assert [status for status, _ in answers] == [200, 200, 200]  # the update came twice

    stored = await teams.engine.store.personal_chat("teams", aad("bob"))
    assert stored is not None and stored.conversation_id == chat
    assert stored.reference["conversation"]["id"] == chat
    assert stored.reference["serviceUrl"] == teams.connector.service_url
    await teams.connector.wait_for(lambda c: c.posts(chat))
    (greeting,) = teams.connector.posts(chat)  # one line, once, whatever Teams repeated
    assert "Write pending" in texts(greeting.card)

    # Installed in a channel, nobody's personal chat is stored.
    assert await teams.engine.store.personal_chat("teams", aad("alice")) is None

    # help says what the personal chat offers, beside the admin commands.
    await teams.say("help", as_="bob", conversation=chat, kind="personal")
    await teams.connector.wait_for(lambda c: len(c.posts(chat)) == 2)
    shown = texts(teams.connector.posts(chat)[-1].card)
    assert "pending" in shown and "gate threshold" in shown


async def test_a_stranger_is_told_who_to_ask(teams: Teams):
    await teams.install(chat_of("stranger"), kind="personal", by="stranger")
    (greeting,) = teams.connector.posts(chat_of("stranger"))
    assert "I don't know you yet" in texts(greeting.card) and aad("stranger") in texts(
        greeting.card
    )


async def test_pending_lists_only_what_the_person_may_decide(teams: Teams):
    refund = await start(teams, "refund", "A-1")  # finance: bob and carol
    audit = await start(teams, "audit", "A-2")  # carol only
    for name in ("bob", "carol"):
        await teams.install(chat_of(name), kind="personal", by=name)

    head, card = await pending(teams, "bob", cards=1)
    assert "1 approval request waits for your decision" in texts(head.card)
    assert_valid_card(card.card)
    assert "Refund 5 for A-1" in texts(card.card) and verbs(card.card) == [
        "grant",
        "deny",
        "takeover",
    ]
    assert card.conversation == chat_of("bob") and card.thread is None

    head, *cards = await pending(teams, "carol", cards=2)
    assert "2 approval requests wait" in texts(head.card)
    assert ["Refund 5 for A-1" in texts(c.card) for c in cards] == [True, False]
    assert "Audit A-2" in texts(cards[1].card)

    async def listed() -> list[str]:  # remembered, to be updated on a decision
        found = await teams.engine.store.chat_messages(request_id=audit, kind="card")
        return [m.message_ref for m in found if m.channel != "teams:ops"]

    assert await wait_for(listed) == [cards[1].activity_id]

    # In a channel, pending shows nothing of anyone's approvals.
    before = len(teams.connector.posts())
    await teams.say("pending", as_="bob")
    await teams.connector.wait_for(lambda c: len(c.posts()) > before)
    (answer,) = teams.connector.posts()[before:]
    assert "personal chat" in texts(answer.card) and "Refund" not in texts(answer.card)
    assert refund  # decided nowhere yet


async def test_a_click_in_the_personal_chat_decides_once_and_updates_every_copy(teams: Teams):
    request_id = await start(teams, "refund", "A-3")
    (channel_card,) = await wait_for(
        lambda: teams.engine.store.chat_messages(request_id=request_id, kind="card")
    )
    await teams.install(chat_of("bob"), kind="personal", by="bob")
    _, listed = await pending(teams, "bob", cards=1)

    clicks = [
        teams.click(
            "grant",
            request_id,
            as_="bob",
            card=listed.activity_id,
            conversation=chat_of("bob"),
            kind="personal",
        )
        for _ in range(3)  # a double click, and Teams retrying it
    ]
    answers = await asyncio.gather(*clicks)
    shown = [texts(body["value"]) for _, body in answers]
    assert sum("Already decided by bob" in t for t in shown) == 2
    assert all("Approved by bob" in t for t in shown)

    request = await teams.engine.store.get_takeover(request_id)
    assert request.decided_by == "bob"
    await wait_status(teams.engine, request.run_id, RunStatus.COMPLETED)
    ledger = await teams.engine.store.ledger(run_id=request.run_id)
    assert [r["action"] for r in ledger] == ["refund"]  # once

    # Both copies are updated for everyone: the channel's card and the listed one.
    def updated(c):
        return c.updates(listed.activity_id) and c.updates(channel_card.message_ref)

    await teams.connector.wait_for(updated)
    for activity_id in (listed.activity_id, channel_card.message_ref):
        card = teams.connector.current_card(activity_id)
        assert "Approved by bob" in texts(card) and verbs(card) == []


async def test_a_group_address_sends_each_approver_a_personal_card(
    teams: Teams, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="bot.teams")
    for name in ("bob", "carol"):
        await teams.install(chat_of(name), kind="personal", by=name)
    request_id = await start(teams, "direct", "A-4")
    run_id = (await teams.engine.store.get_takeover(request_id)).run_id

    def both(c):
        return c.posts(chat_of("bob"))[1:] and c.posts(chat_of("carol"))[1:]

    await teams.connector.wait_for(both)
    bob_card = teams.connector.posts(chat_of("bob"))[-1]
    carol_card = teams.connector.posts(chat_of("carol"))[-1]
    for post in (bob_card, carol_card):
        assert "Direct A-4" in texts(post.card) and post.thread is None
        assert_valid_card(post.card)
    assert teams.connector.posts(CHANNEL)[1:] == []  # nothing in the channel

    # The seven other approvers never added the bot: each is logged once, nothing is lost.
    def unreached() -> list[str]:
        return [m for m in caplog.messages if "has no personal chat with the bot" in m]

    async def recorded() -> bool:  # each person's card row is done once they are handled
        rows = await teams.engine.store.outbox_messages(run_id=run_id)
        cards = [status for r, status, _ in rows if r.kind == "card"]
        return bool(cards) and all(status != "pending" for status in cards)

    async def all_logged() -> bool:  # one row each: they are delivered in any order
        return len(unreached()) >= 7

    await wait_for(recorded)
    await wait_for(all_logged)
    assert len(unreached()) == 7 and any(m.startswith("teams: dave ") for m in unreached())

    # dave adds the bot later: the greeting says a request waits for him.
    await teams.install(chat_of("dave"), kind="personal", by="dave")
    (greeting,) = teams.connector.posts(chat_of("dave"))
    assert "1 approval request waits for you now" in texts(greeting.card)

    status, body = await teams.click(
        "grant",
        request_id,
        as_="carol",
        card=carol_card.activity_id,
        conversation=chat_of("carol"),
        kind="personal",
    )
    assert status == 200 and "Approved by carol" in texts(body["value"])

    def updated(c):
        return c.updates(bob_card.activity_id) and c.updates(carol_card.activity_id)

    await teams.connector.wait_for(updated)
    for post in (bob_card, carol_card):
        card = teams.connector.current_card(post.activity_id)
        assert "Approved by carol" in texts(card) and verbs(card) == []
    # The decision shows on the cards; no notice follows them into the personal chats.
    assert len(teams.connector.posts(chat_of("bob"))) == 2
    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)
    assert len(unreached()) == 7


async def test_pending_leaves_out_what_the_person_has_already_approved(teams: Teams):
    request_id = await start(teams, "two", "Q-1")
    bob = Principal(name="bob", role=Role.APPROVER, person="bob")
    await teams.engine.approvals.grant(request_id, bob)  # one of the two approvals
    for name in ("bob", "carol"):
        await teams.install(chat_of(name), kind="personal", by=name)
    (answer,) = await pending(teams, "bob", cards=0)
    assert "Nothing waits for your decision" in texts(answer.card)
    _, card = await pending(teams, "carol", cards=1)
    assert "Two of Q-1" in texts(card.card)


async def test_a_chat_the_bot_was_removed_from_keeps_the_card_from_no_one_else(
    teams: Teams, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="bot.teams")
    for name in ("bob", "carol"):
        await teams.install(chat_of(name), kind="personal", by=name)
    # The first card sent (each person's copy is a row of its own, so either may go first):
    # BotNotInConversationRoster, as when that person removed the bot.
    teams.connector.fail_next(403)
    await start(teams, "direct", "A-5")

    def removed() -> list[str]:
        return [m for m in caplog.messages if "has removed the bot" in m]

    (line,) = await wait_for(removed)
    gone, other = ("bob", "carol") if line.startswith("teams: bob ") else ("carol", "bob")
    assert line.startswith(f"teams: {gone} has removed the bot from their personal chat")
    await teams.connector.wait_for(lambda c: c.posts(chat_of(other))[1:])
    assert "Direct A-5" in texts(teams.connector.posts(chat_of(other))[-1].card)
    assert teams.connector.posts(chat_of(gone))[1:] == []
    assert teams.connector.failed == [("send", 403)]


async def test_the_personal_chat_survives_a_restart(migrated_db_url):
    async with running_teams(migrated_db_url, WORKFLOWS) as first:
        await first.install(chat_of("bob"), kind="personal", by="bob")
        port = first.connector.port
    # A new process on the same database; Teams' service is where it was.
    async with running_teams(
        migrated_db_url, WORKFLOWS, connector=FakeConnector(port=port)
    ) as second:
        await start(second, "direct", "R-1")
        await second.connector.wait_for(lambda c: c.posts(chat_of("bob")))
        (card,) = second.connector.posts(chat_of("bob"))
        assert "Direct R-1" in texts(card.card)


async def test_a_reminder_follows_the_card_into_the_personal_chat(teams: Teams):
    await teams.install(chat_of("bob"), kind="personal", by="bob")  # carol never did
    await start(teams, "reminded", "M-1")
    await teams.connector.wait_for(lambda c: c.posts(chat_of("bob"))[1:])

    teams.clock.advance(minutes=21)
    await teams.engine.sweeper.sweep_once()
    await teams.connector.wait_for(lambda c: c.posts(chat_of("bob"))[2:])
    _greeting, card, reminder = teams.connector.posts(chat_of("bob"))
    assert "Remind M-1" in texts(card.card)
    assert "Reminder" in texts(reminder.card)
    assert_valid_card(reminder.card)
    assert teams.connector.posts(chat_of("carol")) == []


async def test_teams_dm_gives_each_approver_a_copy_of_their_own(teams: Teams):
    for name in ("bob", "carol"):
        await teams.install(chat_of(name), kind="personal", by=name)
    request_id = await start(teams, "each", "D-1")
    request = await teams.engine.store.get_takeover(request_id)
    assert request.channels == ("teams:@bob", "teams:@carol")  # one address per approver

    def both(c):
        return c.posts(chat_of("bob"))[1:] and c.posts(chat_of("carol"))[1:]

    await teams.connector.wait_for(both)
    for name in ("bob", "carol"):
        (card,) = teams.connector.posts(chat_of(name))[1:]
        assert "Each D-1" in texts(card.card)

    async def sent() -> list[str]:  # each copy is an outbox row of its own channel
        rows = await teams.engine.store.outbox_messages(run_id=request.run_id)
        done = sorted(r.channel for r, status, _ in rows if r.kind == "card" and status == "sent")
        return done if len(done) == 2 else []

    assert await wait_for(sent) == ["teams:@bob", "teams:@carol"]
