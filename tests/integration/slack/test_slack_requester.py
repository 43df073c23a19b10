"""The person who started a run is told, in Slack, how its request ended: in the card's thread
(the decision's own notice mentions them: one message, not two) when the card went to a
channel; in their own direct message with the bot when it went only to the approvers' DMs.
Whoever ended it themselves, and an agent's token without a person, are told nothing."""

from __future__ import annotations

from typing import Any

from engine.domain.model import Role, RunStatus, TakeoverStatus
from tests.fakes.slack import Message
from tests.integration.slack.harness import CHANNEL, USERS, SlackHarness, running_slack
from tests.integration.slack.test_slack_direct import cards_in_dms
from tests.integration.slack.test_slack_notices import texts
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status

FLOWS = f"""
shared:
  nodes:
    - {{id: approve, type: approval, approvers: [bob],
       channels: ["slack:{CHANNEL}"], timeoutMinutes: 30}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
direct:
  nodes:
    - {{id: approve, type: approval, approvers: [bob],
       channels: ["slack:dm"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
own:
  nodes:
    - {{id: approve, type: approval, approvers: [dave, bob], allowSelfApproval: true,
       channels: ["slack:{CHANNEL}"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
"""
DAVE = f"<@{USERS['dave']}>"


async def start_as_dave(h: SlackHarness, workflow: str, order: str) -> str:
    """A run started through an agent token that acts for dave (``--person dave``)."""
    if "dave-agent" not in h.api.tokens:
        await h.api.token("dave-agent", Role.AGENT, "dave")
    status, run = await h.api.call(
        "POST",
        "/v1/runs",
        as_="dave-agent",
        json={"workflow": workflow, "input": {"order": order}},
    )
    assert status == 201, run
    return str(run["id"])


async def replies(h: SlackHarness, count: int, root: int = 0) -> tuple[Message, list[Message]]:
    """The ``root``-th card in the channel and its first ``count`` replies, once there."""

    async def there() -> tuple[Message, list[Message]] | None:
        roots = [m for m in h.slack.posted(CHANNEL) if m.thread_ts is None]
        if len(roots) <= root:
            return None
        found = [m for m in h.slack.thread(CHANNEL, roots[root].ts) if m is not roots[root]]
        return (roots[root], found) if len(found) >= count else None

    result: tuple[Message, list[Message]] = await wait_for(there)
    return result


async def outbox_done(h: SlackHarness, run_id: str) -> list[Any]:
    async def sent() -> list[Any] | None:
        rows = await h.engine.store.outbox_messages(run_id=run_id)
        return rows if {status for _, status, _ in rows} == {"sent"} else None

    rows: list[Any] = await wait_for(sent)
    return rows


async def test_approved_in_a_channel_the_decision_in_the_thread_mentions_the_requester(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await start_as_dave(h, "shared", "A-1")
        request = await h.request_of(run_id)
        assert request.requested_by == "dave"
        assert request.details["requester"] == {"person": "dave", "channels": [f"slack:{CHANNEL}"]}
        card, _ = await replies(h, 0)
        status, _ = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=card.ts)
        assert status == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        _, (decision, result) = await replies(h, 2)
        assert decision.text.startswith(f"{DAVE} bob approved your request demo-ledger · note")
        assert f"✅ {DAVE} *bob* approved your request *demo-ledger · note*" in texts(decision)
        assert result.text == "Step act completed"
        rows = await outbox_done(h, run_id)
        # One notice says it: the decision's own, no second message in the thread, no DM.
        assert len([r for r, _, _ in rows if r.kind == "notice" and "requester" in r.payload]) == 1
        assert h.slack.dm(USERS["dave"]) == []
        assert h.slack.duplicates() == {}

        # A denial, with its reason, the same way.
        run_id = await start_as_dave(h, "shared", "A-2")
        request = await h.request_of(run_id)
        status, answer = await h.submit_deny(USERS["bob"], request.id, "not this order")
        assert status == 200, answer
        await wait_status(h.engine, run_id, RunStatus.FAILED)
        _, (denial, failed) = await replies(h, 2, root=1)
        assert failed.text == "Step approve failed"  # the run's own notice, after the decision
        body = texts(denial)
        assert f"⛔ {DAVE} *bob* denied your request *demo-ledger · note*" in body
        assert "*Reason*\nnot this order" in body


async def test_a_card_sent_only_to_dms_tells_the_requester_in_their_own_dm(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await start_as_dave(h, "direct", "B-1")
        request = await h.request_of(run_id)
        assert request.channels == ("slack:@bob",)
        cards = await cards_in_dms(h, "bob")
        status, _ = await h.click(
            USERS["bob"], "signoff_grant", request.id, message_ts=cards["bob"].ts
        )
        assert status == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)

        async def told() -> list[Message]:
            return h.slack.dm(USERS["dave"])

        (own,) = await wait_for(told)
        assert own.thread_ts is None and not own.blocks[0].get("accessory")
        assert "*bob* approved your request *demo-ledger · note*" in texts(own)
        await outbox_done(h, run_id)
        assert len(h.slack.dm(USERS["dave"])) == 1  # once
        # Bob's own copy gets the plain decision notice, not the requester's words.
        under_card = [m for m in h.slack.dm(USERS["bob"]) if m.thread_ts == cards["bob"].ts]
        assert under_card and all("your request" not in texts(m) for m in under_card)
        assert h.slack.posted(CHANNEL) == [] and h.slack.duplicates() == {}


async def test_an_expiry_is_told_in_the_thread(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        run_id = await start_as_dave(h, "shared", "C-1")
        await h.request_of(run_id)
        await replies(h, 0)
        clock.advance(minutes=31)
        await h.engine.sweeper.sweep_once()
        _, (expired, *_) = await replies(h, 1)
        assert expired.text.startswith(f"{DAVE} Your request demo-ledger · note expired")
        assert "with no decision: the step was rejected (auto-reject)" in texts(expired)
        await wait_status(h.engine, run_id, RunStatus.FAILED)


async def test_whoever_ended_it_and_an_agent_without_a_person_are_told_nothing(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        # Dave approves the run he started himself (allowSelfApproval): not told what he did.
        run_id = await start_as_dave(h, "own", "D-1")
        request = await h.request_of(run_id)
        card, _ = await replies(h, 0)
        await h.click(USERS["dave"], "signoff_grant", request.id, message_ts=card.ts)
        decided = await h.request_of(run_id, TakeoverStatus.RELEASED)
        assert decided.decided_by == "dave"
        _, (decision, *_) = await replies(h, 1)
        assert "your request" not in texts(decision) and DAVE not in texts(decision)

        # An agent token without a person: nobody to tell.
        run_id = await h.start("shared", {"order": "D-2"})
        request = await h.request_of(run_id)
        assert "requester" not in request.details
        card, _ = await replies(h, 0, root=1)
        await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=card.ts)
        _, (decision, *_) = await replies(h, 1, root=1)
        assert "your request" not in texts(decision)
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        assert h.slack.dm(USERS["dave"]) == []
