"""The person who started a run is told, in Teams, how its request ended: in the card's thread
of a named conversation (the decision's own notice, with a real @mention on the activity), or
in their personal chat with the bot when the card went only to the approvers' chats."""

from __future__ import annotations

import logging

import pytest
from teamsharness import CHANNEL, Teams, aad, assert_valid_card, running_teams, subscribed, texts

from engine.domain.model import Principal, Role, RunStatus, TakeoverStatus
from tests.support.engines import wait_for, wait_status

WORKFLOWS = """
shared:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.order }}", approvers: [bob],
       channels: [teams:ops], timeoutMinutes: 30}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {n: 1}}
direct:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.order }}", approvers: [bob],
       channels: ["teams:@bob"], timeoutMinutes: 30}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {n: 1}}
"""
# An agent's token that acts for dave (``signoff token create --person dave``).
DAVE = Principal(name="dave", role=Role.AGENT, person="dave", token="dave-agent")


def chat_of(name: str) -> str:
    return f"a:1{name}-personal-chat"


async def start(teams: Teams, workflow: str, order: str) -> tuple[str, str]:
    run, _ = await teams.engine.runs.start_run(workflow, {"order": order}, DAVE)
    await wait_status(teams.engine, run.id, RunStatus.WAITING)
    (request,) = await teams.engine.store.list_takeovers(run_id=run.id)
    return run.id, request.id


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, WORKFLOWS) as t:
        await subscribed(t)
        yield t


async def test_the_decision_in_the_thread_mentions_the_requester(teams: Teams):
    run_id, request_id = await start(teams, "shared", "T-1")

    async def card():
        return await teams.engine.store.chat_messages(request_id=request_id, kind="card")

    (posted,) = await wait_for(card)
    status, _ = await teams.click("grant", request_id, as_="bob", card=posted.message_ref)
    assert status == 200
    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)

    def in_thread(c):
        return [p for p in c.posts(CHANNEL) if p.thread == posted.message_ref]

    await teams.connector.wait_for(lambda c: len(in_thread(c)) >= 2)  # decision, step result
    decision = in_thread(teams.connector)[0]
    assert_valid_card(decision.card)
    assert "bob approved your request" in texts(decision.card)
    assert decision.activity["text"] == "<at>dave</at>"
    assert decision.activity["entities"] == [
        {
            "type": "mention",
            "text": "<at>dave</at>",
            "mentioned": {"id": aad("dave"), "name": "dave"},
        }
    ]
    assert len([p for p in in_thread(teams.connector) if "your request" in texts(p.card)]) == 1


async def test_a_card_only_in_personal_chats_tells_the_requester_in_theirs(teams: Teams):
    for name in ("bob", "dave"):
        await teams.install(chat_of(name), kind="personal", by=name)
    run_id, request_id = await start(teams, "direct", "T-2")
    await teams.connector.wait_for(lambda c: len(c.posts(chat_of("bob"))) >= 2)
    bob_card = teams.connector.posts(chat_of("bob"))[-1]
    before = len(teams.connector.posts(chat_of("dave")))  # his greeting

    status, body = await teams.click(
        "deny",
        request_id,
        as_="bob",
        card=bob_card.activity_id,
        conversation=chat_of("bob"),
        kind="personal",
        reason="not this order",
    )
    assert status == 200, body
    denied = await teams.engine.store.get_takeover(request_id)
    assert denied.status == TakeoverStatus.DENIED
    await teams.connector.wait_for(lambda c: len(c.posts(chat_of("dave"))) > before)
    (told,) = teams.connector.posts(chat_of("dave"))[before:]
    assert_valid_card(told.card)
    assert "bob denied your request" in texts(told.card)
    assert "not this order" in texts(told.card)
    await wait_status(teams.engine, run_id, RunStatus.FAILED)

    async def done() -> list:
        rows = await teams.engine.store.outbox_messages(run_id=run_id)
        if any(status == "pending" for _, status, _ in rows):
            return []
        return [(r.payload, status) for r, status, _ in rows if r.channel == "teams:@dave"]

    ((payload, status),) = await wait_for(done)
    assert (payload["requester"], status) == ("dave", "sent")
    assert len(teams.connector.posts(chat_of("dave"))) == before + 1
    # Bob's own chat shows the decision on his card, and no notice.
    assert len(teams.connector.posts(chat_of("bob"))) == 2  # greeting, card


async def test_a_requester_who_never_added_the_bot_is_logged_and_nothing_waits(
    teams: Teams, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="bot.teams")
    await teams.install(chat_of("bob"), kind="personal", by="bob")
    run_id, request_id = await start(teams, "direct", "T-3")
    await teams.connector.wait_for(lambda c: len(c.posts(chat_of("bob"))) >= 2)
    bob = Principal(name="bob", role=Role.APPROVER, person="bob")
    await teams.engine.approvals.grant(request_id, bob, release=True)
    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)

    async def done() -> list:
        rows = await teams.engine.store.outbox_messages(run_id=run_id)
        found = [status for r, status, _ in rows if r.channel == "teams:@dave"]
        return found if "pending" not in found else []

    assert await wait_for(done) == ["sent"]  # done, not retried: dave has no chat to go to
    (line,) = [m for m in caplog.messages if m.startswith("teams: dave ")]
    assert line == (
        "teams: dave has no personal chat with the bot (never added it), so the outcome of "
        f"request {request_id} did not reach them"
    )
    assert teams.connector.posts(chat_of("dave")) == []
