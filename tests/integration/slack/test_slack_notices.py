"""Notices in the run's thread: the gate's confidence evaluation, reminders, escalations; and the
thread a run was started from."""

from __future__ import annotations

from typing import Any

from engine.domain.model import RunStatus, TakeoverStatus
from tests.fakes.slack import Message
from tests.integration.slack.harness import CHANNEL, USERS, SlackHarness, running_slack
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status

FLOWS = f"""
gated:
  nodes:
    - {{id: pay, type: connector, connector: demo-ledger, action: refund,
       args: {{order: "{{{{ input.order }}}}"}}, channels: ["slack:{CHANNEL}"],
       approvers: [finance]}}
slow:
  nodes:
    - {{id: approve, type: approval, approvers: [finance], channels: ["slack:{CHANNEL}"],
       timeoutMinutes: 30, remindBeforeMinutes: 10, escalateAfterMinutes: 5,
       escalateTo: [dave]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
"""
# verbalization scores 0.9 when the run says nothing about its confidence: below 0.95.
GATE = "gate: {enabled: true, threshold: 0.95, estimator: verbalization}\n"


async def thread_of(h: SlackHarness, count: int) -> tuple[Message, list[Message]]:
    """The channel's one root and its first ``count`` replies, once all are there."""

    async def there() -> tuple[Message, list[Message]] | None:
        roots = [m for m in h.slack.posted(CHANNEL) if m.thread_ts is None]
        if len(roots) != 1:
            return None
        replies = [m for m in h.slack.thread(CHANNEL, roots[0].ts) if m is not roots[0]]
        return (roots[0], replies) if len(replies) >= count else None

    found: tuple[Message, list[Message]] = await wait_for(there)
    return found


def texts(message: Message) -> str:
    return "\n".join(
        [message.text]
        + [b["text"]["text"] for b in message.blocks or [] if isinstance(b.get("text"), dict)]
    )


async def test_a_diverted_step_posts_its_card_first_and_the_confidence_in_its_thread(
    migrated_db_url: str,
) -> None:
    async with running_slack(migrated_db_url, FLOWS, extra=GATE) as h:
        run_id = await h.start("gated", {"order": "G-1"})
        request = await h.request_of(run_id)
        card, (confidence,) = await thread_of(h, 1)
        assert card.dedupe == f"card:{request.id}:slack:{CHANNEL}"
        assert confidence.text.startswith("Confidence 0.90 (threshold 0.95)")
        assert "verbalization" in texts(confidence)

        status, _ = await h.click(USERS["bob"], "signoff_grant", request.id)
        assert status == 200
        _, replies = await thread_of(h, 3)
        assert replies[2].text == "Step pay completed"
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        # The card's own outbox row found it posted: one card, no duplicate.
        assert len([m for m in h.slack.posted(CHANNEL) if m.blocks and m.thread_ts is None]) == 1
        assert h.slack.duplicates() == {}

        async def all_sent() -> bool:
            rows = await h.engine.store.outbox_messages(run_id=run_id)
            return {status for _, status, _ in rows} == {"sent"}

        await wait_for(all_sent)


async def test_escalation_and_reminder_are_posted_once_each(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        run_id = await h.start("slow", {})
        request = await h.request_of(run_id)
        await thread_of(h, 0)

        clock.advance(minutes=5)
        await h.engine.sweeper.sweep_once()
        card, (escalated,) = await thread_of(h, 1)
        assert "Escalated" in escalated.text
        assert "<@U0DAVE001>" in texts(escalated)
        assert "has waited 5 min without" in texts(escalated)

        clock.advance(minutes=15)
        await h.engine.sweeper.sweep_once()
        await h.engine.sweeper.sweep_once()  # a second pass finds nothing new
        _, (_, reminder) = await thread_of(h, 2)
        assert reminder.text.startswith("Reminder:")
        body = texts(reminder)
        assert all(f"<@{USERS[p]}>" in body for p in ("alice", "bob", "carol", "dave"))

        clock.advance(minutes=1)
        await h.engine.sweeper.sweep_once()
        await h.engine.dispatcher.deliver_due()
        assert len(h.slack.thread(CHANNEL, card.ts)) == 3  # card, escalation, reminder

        # Escalation asked dave, so dave may now decide.
        status, key = await h.click(USERS["dave"], "signoff_grant", request.id)
        assert status == 200
        decided = await h.engine.store.get_takeover(request.id)
        assert (decided.status, decided.decided_by) == (TakeoverStatus.RELEASED, "dave")
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        assert h.told(key) == []


async def test_a_run_started_from_a_slack_thread_posts_into_it(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        origin = "1700000000.000100"
        slack_input: dict[str, Any] = {"channel": CHANNEL, "thread_ts": origin}
        run_id = await h.start("slow", {"slack": slack_input})
        request = await h.request_of(run_id)

        async def card() -> Message | None:
            return next(iter(h.slack.posted(CHANNEL)), None)

        posted: Message = await wait_for(card)
        assert posted.thread_ts == origin
        await h.click(USERS["carol"], "signoff_grant", request.id)

        async def three() -> list[Message] | None:
            found = [m for m in h.slack.posted(CHANNEL) if m.thread_ts == origin]
            return found if len(found) >= 3 else None

        card_msg, decision, result = await wait_for(three)
        assert "carol" in decision.text and result.text == "Step act completed"
        assert [m for m in h.slack.posted(CHANNEL) if m.thread_ts != origin] == []
        thread = await h.engine.store.chat_thread(run_id, f"slack:{CHANNEL}")
        assert thread is not None and thread.thread_ref == origin
        assert card_msg.updates == 1
