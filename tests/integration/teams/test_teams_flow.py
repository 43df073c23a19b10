"""End to end through Teams: a real server and database, activities as Teams sends them, and a
fake Bot Connector that records what the bot posts and updates (and enforces the rate limits).

Run -> approval card in the channel thread with the exact arguments -> Action.Execute ->
the clicker's card replaced by the invoke response, the message updated for everyone, the step
executed once, its result in the thread."""

from __future__ import annotations

import pytest
from teamsharness import (
    APPROVERS,
    CHANNEL,
    FLOW,
    Teams,
    aad,
    assert_valid_card,
    card_posted,
    running_teams,
    start_run,
    subscribed,
    texts,
    verbs,
)

from engine.adapters.store.migrate import upgrade_to_head
from engine.domain.model import RunStatus
from tests.support.engines import wait_status


@pytest.fixture
async def teams(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW) as t:
        await subscribed(t)
        yield t


async def test_subscribe_needs_an_admin_and_is_confirmed_in_the_conversation(teams: Teams):
    confirmations = teams.connector.posts(CHANNEL)
    assert len(confirmations) == 1
    assert "teams:ops" in texts(confirmations[0].card)
    assert confirmations[0].thread is not None  # a reply under the admin's own message
    conversation = await teams.engine.store.conversation("teams", name="ops")
    assert conversation is not None and conversation.conversation_id == CHANNEL
    assert conversation.reference["serviceUrl"] == teams.connector.service_url

    await teams.say("subscribe elsewhere", as_="bob")
    await teams.connector.wait_for(lambda c: len(c.posts()) == 2)
    assert "Only an admin" in texts(teams.connector.posts()[-1].card)
    assert await teams.engine.store.conversation("teams", name="elsewhere") is None

    # teams:dm means each approver's personal chat: no conversation takes that name.
    await teams.say("subscribe dm", as_="alice")
    await teams.connector.wait_for(lambda c: len(c.posts()) == 3)
    assert "no conversation can be named dm" in texts(teams.connector.posts()[-1].card)
    assert await teams.engine.store.conversation("teams", name="dm") is None

    # A personal chat can be named too (no mention needed there).
    await teams.install("a:1personal-chat-id", kind="personal", by="alice")
    await teams.say(
        "subscribe alice-dm", as_="alice", conversation="a:1personal-chat-id", kind="personal"
    )
    dm = await teams.engine.store.conversation("teams", name="alice-dm")
    assert dm is not None and dm.conversation_id == "a:1personal-chat-id"


async def test_approve_replaces_the_card_updates_it_for_everyone_and_runs_the_step_once(
    teams: Teams,
):
    run_id = await start_run(teams)
    request_id, card_id = await card_posted(teams, run_id)

    root = teams.connector.posts(CHANNEL)[-1]
    assert root.activity_id == card_id and root.thread is None  # the run's thread root
    card = root.card
    assert_valid_card(card)
    assert verbs(card) == ["grant", "deny", "takeover"]
    shown = texts(card)
    assert "Refund 420 for A-17" in shown
    assert '"amount": 420' in shown and '"order": "A-17"' in shown  # the exact arguments
    thread = await teams.engine.store.chat_thread(run_id, "teams:ops")
    assert thread is not None and thread.thread_ref == card_id

    status, body = await teams.click("grant", request_id, as_="bob", card=card_id)
    assert status == 200
    assert body["statusCode"] == 200
    assert body["type"] == "application/vnd.microsoft.card.adaptive"
    assert_valid_card(body["value"])
    assert "Approved by bob" in texts(body["value"]) and verbs(body["value"]) == []

    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)
    ledger = await teams.engine.store.ledger(run_id=run_id)
    assert [(r["action"], r["args"]) for r in ledger] == [
        ("lookup", {"order": "A-17"}),
        ("refund", {"order": "A-17", "amount": 420}),
    ]

    def settled(c):
        notices = [p for p in c.posts() if p.thread == card_id]
        return c.updates(card_id) and len(notices) >= 2

    await teams.connector.wait_for(settled)
    updated = teams.connector.current_card(card_id)
    assert_valid_card(updated)
    assert "Approved by bob" in texts(updated) and verbs(updated) == []
    in_thread = [texts(p.card) for p in teams.connector.posts() if p.thread == card_id]
    assert any("bob" in t and "approved" in t for t in in_thread)
    assert any("refund" in t and "completed" in t for t in in_thread)  # the step result

    # Clicking the stale card again changes nothing and says so, to the clicker only.
    posts_before = len(teams.connector.posts())
    status, body = await teams.click("grant", request_id, as_="carol", card=card_id)
    assert "Already decided by bob" in texts(body["value"])
    assert len(await teams.engine.store.ledger(run_id=run_id)) == 2
    assert len(teams.connector.posts()) == posts_before


async def test_deny_with_a_reason_takes_the_deny_path(teams: Teams):
    run_id = await start_run(teams)
    request_id, card_id = await card_posted(teams, run_id)

    status, body = await teams.click(
        "deny", request_id, as_="carol", card=card_id, reason="wrong amount"
    )
    assert status == 200
    denied = body["value"]
    assert_valid_card(denied)
    assert "Denied by carol" in texts(denied) and "wrong amount" in texts(denied)

    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)
    ledger = await teams.engine.store.ledger(run_id=run_id)
    assert [r["action"] for r in ledger] == ["lookup", "note"]  # refund never ran
    await teams.connector.wait_for(lambda c: c.updates(card_id))
    assert "wrong amount" in texts(teams.connector.current_card(card_id))


async def test_take_over_then_release(teams: Teams):
    run_id = await start_run(teams)
    request_id, card_id = await card_posted(teams, run_id)

    _, body = await teams.click("takeover", request_id, as_="dave", card=card_id)
    assert verbs(body["value"]) == ["release"]
    assert "Taken over by dave" in texts(body["value"])
    assert (await teams.engine.store.get_run(run_id)).status == RunStatus.WAITING

    # Only the taker (or an admin) may hand it back.
    _, body = await teams.click("release", request_id, as_="mallory", card=card_id)
    assert verbs(body["value"]) == ["release"]
    assert "dave took this run over, so only they or an admin can release it" in texts(
        body["value"]["body"][0]
    )
    _, body = await teams.click("release", request_id, as_="dave", card=card_id)
    assert verbs(body["value"]) == []
    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)
    assert [r["action"] for r in await teams.engine.store.ledger(run_id=run_id)] == [
        "lookup",
        "refund",
    ]

    def told(c):
        return [texts(p.card) for p in c.posts() if p.thread == card_id]

    await teams.connector.wait_for(lambda c: len(told(c)) >= 3)
    said = " | ".join(told(teams.connector))
    assert "dave took over" in said and "dave released" in said


async def test_refusals_go_to_the_clicker_only_and_change_nothing(teams: Teams):
    run_id = await start_run(teams)
    request_id, card_id = await card_posted(teams, run_id)
    posts_before = len(teams.connector.posts())

    # mallory is in people: but not in finance; a stranger is not in people: at all.
    for who, reason in [
        ("mallory", "not an approver"),
        ("stranger", "not in Signoff's people list"),
    ]:
        status, body = await teams.click("grant", request_id, as_=who, card=card_id)
        assert status == 200 and body["type"] == "application/vnd.microsoft.card.adaptive"
        card = body["value"]
        assert_valid_card(card)
        assert reason in texts(card["body"][0])  # the banner on top
        assert verbs(card) == ["grant", "deny", "takeover"]  # the card is unchanged otherwise

    request = await teams.engine.store.get_takeover(request_id)
    assert request.status == "pending" and request.votes == ()
    assert len(teams.connector.posts()) == posts_before
    assert teams.connector.updates(card_id) == []

    # Refresh returns the current card for anyone.
    _, body = await teams.click("refresh", request_id, as_="stranger", card=card_id)
    assert verbs(body["value"]) == ["grant", "deny", "takeover"]
    assert aad("stranger") not in texts(body["value"])
    # The refresh knows who reads the card: an admin outside its approvers is told, before
    # clicking, that deciding is an override; an approver is not.
    _, body = await teams.click("refresh", request_id, as_="alice", card=card_id)
    warning = "You are not among its approvers: deciding now is an admin override."
    assert texts(body["value"]["body"][0]) == warning
    _, body = await teams.click("refresh", request_id, as_=APPROVERS[0], card=card_id)
    assert "override" not in texts(body["value"])


async def test_expiry_updates_the_card_and_posts_a_notice(teams: Teams):
    run_id = await start_run(teams)
    _, card_id = await card_posted(teams, run_id)

    teams.clock.advance(minutes=31)
    assert await teams.engine.sweeper.sweep_once() == 1
    await teams.connector.wait_for(lambda c: c.updates(card_id))
    expired = teams.connector.current_card(card_id)
    assert_valid_card(expired)
    assert "Expired" in texts(expired) and verbs(expired) == []
    await teams.connector.wait_for(
        lambda c: any("expired" in texts(p.card).lower() for p in c.posts() if p.thread == card_id)
    )
    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)  # auto-reject -> onDeny path
    assert [r["action"] for r in await teams.engine.store.ledger(run_id=run_id)] == [
        "lookup",
        "note",
    ]


async def test_an_admins_deny_is_an_override_the_card_names(teams: Teams):
    """alice is the admin and not in finance: her Deny decides, as an admin override."""
    run_id = await start_run(teams)
    request_id, card_id = await card_posted(teams, run_id)
    status, body = await teams.click("deny", request_id, as_="alice", card=card_id, reason="no")
    assert status == 200
    denied = body["value"]
    assert_valid_card(denied)
    assert "Denied by alice (admin override)" in texts(denied)
    await wait_status(teams.engine, run_id, RunStatus.COMPLETED)  # the deny path ran
    journal = await teams.engine.store.journal(run_id)
    (event,) = [e for e in journal if e.event == "takeover_denied"]
    assert (event.data["by"], event.data["override"]) == ("alice", "admin")
    await teams.connector.wait_for(lambda c: c.updates(card_id))
    assert "Denied by alice (admin override)" in texts(teams.connector.current_card(card_id))


async def test_engines_in_one_process_never_show_each_others_cards(tmp_path):
    """Request ids repeat across databases (sequential ids here, a replica per database in
    one process): each engine renders its own request, not a card cached for the other's."""
    shown = []
    for n, amount in ((1, 111), (2, 222)):
        url = f"sqlite+aiosqlite:///{tmp_path}/db{n}.db"
        await upgrade_to_head(url)
        async with running_teams(url, FLOW) as teams:
            await subscribed(teams)
            run_id = await start_run(teams, amount=amount)
            await card_posted(teams, run_id)
            shown.append(texts(teams.connector.posts(CHANNEL)[-1].card))
    assert "Refund 111 for A-17" in shown[0]
    assert "Refund 222 for A-17" in shown[1]
