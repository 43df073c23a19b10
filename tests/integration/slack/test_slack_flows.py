"""End to end through HTTP: a run parks, its card lands in Slack, a signed click decides it, the
card is updated in place, notices and the step's result follow in the card's thread.

Real app (REST API + the bolt endpoint), real database, real workers and outbox dispatcher;
Slack's Web API is ``FakeSlack``. Time is a ``ManualClock``; the background loops deliver.
"""

from __future__ import annotations

from typing import Any

from bot.api.views import approval_url
from cards.slack.render import render_slack_card
from cards.view import build_view
from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.fakes.slack import FakeSlack, Message
from tests.integration.slack.harness import CHANNEL, USERS, SlackHarness, running_slack
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status

FLOWS = f"""
refund:
  nodes:
    - {{id: lookup, type: connector, connector: demo-ledger, action: lookup,
       args: {{order: "{{{{ input.order }}}}"}}}}
    - {{id: approve, type: approval,
       reason: "Refund {{{{ input.amount }}}} for {{{{ input.order }}}}",
       approvers: [finance], channels: ["slack:{CHANNEL}"], timeoutMinutes: 30}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}", amount: "{{{{ input.amount }}}}"}}}}
strict:
  nodes:
    - {{id: approve, type: approval, approvers: [finance], channels: ["slack:{CHANNEL}"],
       denyReasonRequired: true}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}}}
"""


def actions_of(message: Message) -> list[str]:
    return [
        e["action_id"]
        for b in message.blocks or []
        if b["type"] == "actions"
        for e in b["elements"]
    ]


def text_of(message: Message) -> str:
    parts = [message.text]
    for block in message.blocks or []:
        if isinstance(block.get("text"), dict):
            parts.append(block["text"]["text"])
        for item in block.get("fields") or block.get("elements") or []:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
    return "\n".join(parts)


async def card_of(h: SlackHarness, request_id: str) -> Message:
    async def posted() -> Message | None:
        for m in h.slack.posted(CHANNEL):
            if m.dedupe == f"card:{request_id}:slack:{CHANNEL}":
                return m
        return None

    found: Message = await wait_for(posted)
    return found


async def replies(slack: FakeSlack, root: Message, count: int) -> list[Message]:
    """The first ``count`` replies in the card's thread, once they are all there."""

    async def there() -> list[Message] | None:
        found = [m for m in slack.thread(CHANNEL, root.ts) if m.ts != root.ts]
        return found if len(found) >= count else None

    found: list[Message] = await wait_for(there)
    return found


async def until(predicate: Any) -> None:
    async def check() -> bool:
        return bool(predicate())

    await wait_for(check)


async def test_approve_updates_the_card_and_posts_the_result_in_its_thread(
    migrated_db_url: str,
) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        run_id = await h.start("refund", {"order": "A-1", "amount": 42})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)

        # The exact arguments the card was posted with: the run's thread root in the channel.
        (post,) = [c for c in h.slack.calls_of("chat.postMessage") if c.args.get("blocks")]
        run = await h.engine.store.get_run(run_id)
        view = build_view(
            request,
            run,
            approval_url=approval_url("http://signoff.test", request.id),
            run_url=None,
            now=clock.now(),
        )
        expected = render_slack_card(view)
        assert post.args["channel"] == CHANNEL
        assert post.args.get("thread_ts") is None
        assert post.args["blocks"] == expected["blocks"]
        assert post.args["text"] == expected["text"]
        assert post.args["metadata"] == {
            "event_type": "signoff_outbox",
            "event_payload": {"dedupe": f"card:{request.id}:slack:{CHANNEL}"},
        }
        assert '```{"amount":42,"order":"A-1"}```' in "".join(text_of(card).split())
        assert actions_of(card) == ["signoff_grant", "signoff_deny", "signoff_takeover"]
        thread = await wait_for(lambda: h.engine.store.chat_thread(run_id, f"slack:{CHANNEL}"))
        assert thread.thread_ref == card.ts

        status, key = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=card.ts)
        assert status == 200
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.RELEASED

        decision, result = await replies(h.slack, card, 2)
        await until(lambda: card.updates >= 1)
        assert actions_of(card) == []  # no buttons, who and when
        assert "Approved by *bob*" in text_of(card)
        assert "bob" in decision.text and "approved" in decision.text
        assert result.text == "Step refund completed"
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        refunds = [e for e in await h.engine.store.ledger(run_id=run_id) if e["action"] == "refund"]
        assert len(refunds) == 1
        assert h.told(key) == []  # the winner needs no ephemeral
        assert h.slack.duplicates() == {}
        assert len(h.slack.posted(CHANNEL)) == 3


async def test_deny_asks_for_a_reason_that_reaches_the_journal_and_the_agent(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("refund", {"order": "A-2", "amount": 7})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)

        status, _ = await h.click(USERS["carol"], "signoff_deny", request.id, message_ts=card.ts)
        assert status == 200
        await until(lambda: h.slack.views)
        (modal,) = h.slack.views
        assert modal["private_metadata"] == request.id
        assert modal["blocks"][1]["optional"] is True  # optional unless denyReasonRequired
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING

        status, body = await h.submit_deny(USERS["carol"], request.id, "  amount <too> high  ")
        assert (status, body) == (200, "")
        denied = await h.engine.store.get_takeover(request.id)
        assert (denied.status, denied.decided_by, denied.notes) == (
            TakeoverStatus.DENIED,
            "carol",
            "amount <too> high",
        )
        decision, result = await replies(h.slack, card, 2)
        assert "Reason" in text_of(decision) and "amount &lt;too&gt; high" in text_of(decision)
        await until(lambda: card.updates >= 1)
        assert actions_of(card) == [] and "Denied by *carol*" in text_of(card)
        assert result.text == "Step approve failed"
        await wait_status(h.engine, run_id, RunStatus.FAILED)
        journal = await h.engine.store.journal(run_id)
        (denial,) = [e for e in journal if e.event == JournalEvent.TAKEOVER_DENIED]
        assert denial.data["notes"] == "amount <too> high"
        code, run = await h.api.call("GET", f"/v1/runs/{run_id}", as_="agent")
        assert code == 200 and "amount <too> high" in run["error"]
        ledger = await h.engine.store.ledger(run_id=run_id)
        assert not [e for e in ledger if e["action"] == "refund"]


async def test_a_required_reason_is_asked_again_in_the_modal(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("strict", {"order": "A-3"})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)
        await h.click(USERS["bob"], "signoff_deny", request.id, message_ts=card.ts)
        await until(lambda: h.slack.views)
        assert h.slack.views[0]["blocks"][1]["optional"] is False

        status, body = await h.submit_deny(USERS["bob"], request.id, "   ")
        assert status == 200 and body["response_action"] == "errors"
        assert "reason is required" in body["errors"]["reason"]
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.PENDING

        assert (await h.submit_deny(USERS["bob"], request.id, "duplicate order"))[1] == ""
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.DENIED


async def test_take_over_offers_release_and_release_resumes_the_run(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("refund", {"order": "A-4", "amount": 3})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)

        status, key = await h.click(USERS["carol"], "signoff_takeover", request.id)
        assert status == 200
        assert (await h.engine.store.get_takeover(request.id)).status == TakeoverStatus.GRANTED
        (took,) = await replies(h.slack, card, 1)
        assert "took over" in took.text or "taken over" in took.text, took.text
        await until(lambda: actions_of(card) == ["signoff_release"])
        assert "Taken over by *carol*" in text_of(card)
        assert not await h.engine.store.ledger(run_id=run_id) or all(
            e["action"] != "refund" for e in await h.engine.store.ledger(run_id=run_id)
        )

        status, _ = await h.click(USERS["carol"], "signoff_release", request.id)
        assert status == 200
        _, released, result = await replies(h.slack, card, 3)
        assert "released" in released.text, released.text
        assert result.text == "Step refund completed"
        await until(lambda: actions_of(card) == [])
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        assert h.told(key) == []

        # A second release is told what happened, and changes nothing.
        status, key = await h.click(USERS["carol"], "signoff_release", request.id)
        assert status == 200
        assert (await h.wait_told(key)).startswith("Already released by <@U0CAROL01>")


async def test_expiry_updates_the_card_and_posts_the_notice(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        run_id = await h.start("refund", {"order": "A-5", "amount": 1})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)

        clock.advance(minutes=31)
        assert await h.engine.sweeper.sweep_once() == 1
        expired, result = await replies(h.slack, card, 2)
        assert expired.text.startswith("Expired:")
        assert result.text == "Step approve failed"
        await until(lambda: card.updates >= 1)
        assert actions_of(card) == [] and "Expired" in text_of(card)
        await wait_status(h.engine, run_id, RunStatus.FAILED)

        status, key = await h.click(USERS["bob"], "signoff_grant", request.id)
        assert status == 200
        assert await h.wait_told(key) == "This request has already expired; nothing changed."


QUORUM = f"""
pair:
  nodes:
    - {{id: approve, type: approval, approvers: [finance], approvalsRequired: 2,
       channels: ["slack:{CHANNEL}"]}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}}}
"""


async def test_a_quorum_counts_each_approval_in_the_thread(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, QUORUM) as h:
        run_id = await h.start("pair", {"order": "Q-1"})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)

        await h.click(USERS["bob"], "signoff_grant", request.id)
        (first,) = await replies(h.slack, card, 1)
        assert "(1 of 2 approvals)" in first.text or "1 of 2 approvals" in text_of(first)
        await until(lambda: "Approved so far by bob" in text_of(card))
        assert actions_of(card) == ["signoff_grant", "signoff_deny", "signoff_takeover"]

        _, key = await h.click(USERS["bob"], "signoff_grant", request.id)  # again
        assert "already approved this request" in await h.wait_told(key)

        await h.click(USERS["carol"], "signoff_grant", request.id)
        _, second, result = await replies(h.slack, card, 3)
        assert "carol" in second.text and "2 of 2 approvals" in text_of(second)
        assert result.text == "Step refund completed"
        await until(lambda: actions_of(card) == [])
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)


async def test_feedback_buttons_record_the_verdict_on_the_step(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        run_id = await h.start("refund", {"order": "F-1", "amount": 2})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)
        await h.click(USERS["bob"], "signoff_grant", request.id)
        _, result = await replies(h.slack, card, 2)
        value = next(
            e["value"]
            for b in result.blocks or []
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == "signoff_feedback_down"
        )
        assert value == f"{run_id}:refund"
        status, key = await h.click(USERS["carol"], "signoff_feedback_down", value)
        assert status == 200 and "recorded" in await h.wait_told(key)
        journal = await h.engine.store.journal(run_id)
        (feedback,) = [e for e in journal if e.event == JournalEvent.FEEDBACK_RECORDED]
        assert feedback.step_id == "refund" and feedback.data["score"] == 1
        assert feedback.data["by"] == "carol"


OVERRIDE_FLOWS = f"""
bob-only:
  nodes:
    - {{id: approve, type: approval, approvers: [bob], channels: ["slack:{CHANNEL}"]}}
    - {{id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}}}
"""


async def test_an_admins_click_overrides_and_the_card_says_so(migrated_db_url: str) -> None:
    """alice is an admin, not among the approvers (bob): her Approve is an admin override,
    journaled as such and named on the card and in the thread."""
    async with running_slack(migrated_db_url, OVERRIDE_FLOWS) as h:
        run_id = await h.start("bob-only", {"order": "O-1"})
        request = await h.request_of(run_id)
        card = await card_of(h, request.id)
        status, key = await h.click(USERS["alice"], "signoff_grant", request.id, message_ts=card.ts)
        assert status == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        (granted,) = [
            e
            for e in await h.engine.store.journal(run_id)
            if e.event == JournalEvent.TAKEOVER_GRANTED
        ]
        assert (granted.data["by"], granted.data["override"]) == ("alice", "admin")
        decision, _ = await replies(h.slack, card, 2)
        await until(lambda: card.updates >= 1)
        assert "Approved by *alice* (admin override)" in text_of(card)
        assert "alice (admin override)" in decision.text and "approved" in decision.text
        assert h.told(key) == []
