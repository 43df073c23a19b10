"""Outbound delivery through the outbox: Teams' rate limits, retries of 429/412/502/504, the
reminder and escalation notices with real @mentions, and chats without threads."""

from __future__ import annotations

from typing import Any

import pytest
from teamsharness import (
    BOT,
    CHANNEL,
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

from bot.teams.pacing import MARGIN, Pacing, Throttled
from engine.adapters.store.base import insert_outbox
from engine.domain.model import OutboxMessage
from tests.support.engines import wait_for
from tests.support.waiting import within

REMINDING = """
refund:
  nodes:
    - {id: approve, type: approval, reason: "Refund {{ input.amount }}", approvers: [bob, carol],
       channels: [teams:ops], timeoutMinutes: 30, remindBeforeMinutes: 10,
       escalateAfterMinutes: 15, escalateTo: [judy]}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}", amount: "{{ input.amount }}"}}
"""


async def outbox_status(teams: Teams, run_id: str) -> list[tuple[str, str, str | None]]:
    rows = await teams.engine.store.outbox_messages(run_id=run_id)
    return [(m.kind, status, error) for m, status, error in rows]


async def queue_notices(teams: Teams, run_id: str, payloads: list[dict[str, Any]]) -> None:
    """Thread notices for one run, queued at once (as a burst of engine events would)."""
    messages = [
        OutboxMessage(
            channel="teams:ops",
            kind="notice",
            dedupe_key=f"burst:{run_id}:{i}",
            payload=payload,
            run_id=run_id,
        )
        for i, payload in enumerate(payloads)
    ]
    now = teams.engine.clock.now()
    store = teams.engine.store
    await teams.engine.db.transact(lambda conn: insert_outbox(conn, store, messages, now))
    teams.engine.wake_outbox()


def step_results(run_id: str, count: int) -> list[dict[str, Any]]:
    return [
        {"notice": "step_result", "runId": run_id, "stepId": f"s{i}", "ok": True}
        for i in range(count)
    ]


async def test_confidence_and_step_result_notices(migrated_db_url):
    async with running_teams(migrated_db_url, REMINDING) as teams:
        await subscribed(teams)
        run_id = await start_run(teams)
        _, card_id = await card_posted(teams, run_id)
        confidence = {
            "score": 0.6,
            "threshold": 0.75,
            "decision": "divert",
            "node_type": "connector",
            "estimator": "self-consistency",
            "votes": [True, False, True, False, True],
        }
        await queue_notices(
            teams,
            run_id,
            [
                {
                    "notice": "confidence",
                    "runId": run_id,
                    "stepId": "refund",
                    "confidence": confidence,
                },
                {
                    "notice": "step_result",
                    "runId": run_id,
                    "stepId": "refund",
                    "ok": False,
                    "error": "ledger answered 409",
                },
            ],
        )
        await teams.connector.wait_for(
            lambda c: len([p for p in c.posts() if p.thread == card_id]) == 2
        )
        scored, failed = [p.card for p in teams.connector.posts() if p.thread == card_id]
        for card in (scored, failed):
            assert_valid_card(card)
        assert "0.60" in texts(scored) and "0.75" in texts(scored)
        assert "3 of 5 samples said execute" in texts(scored)
        assert "failed" in texts(failed) and "ledger answered 409" in texts(failed)
        assert verbs(failed) == ["feedback", "feedback"]  # 👍 / 👎

        # 👎 from a person in people: is recorded as feedback on the step.
        down = {"runId": run_id, "stepId": "approve", "score": 1}
        activity = teams.click_activity("feedback", "", as_="bob")
        activity["value"]["action"]["data"] = down
        _, body = await teams.post(activity)
        assert body["type"] == "application/vnd.microsoft.activity.message"
        assert "recorded" in body["value"]
        journal = await teams.engine.store.journal(run_id)
        assert [e.data["score"] for e in journal if e.event == "feedback_recorded"] == [1]


async def test_reminder_and_escalation_mention_the_people_they_name(migrated_db_url):
    async with running_teams(migrated_db_url, REMINDING) as teams:
        await subscribed(teams)
        run_id = await start_run(teams)
        _, card_id = await card_posted(teams, run_id)

        teams.clock.advance(minutes=16)
        await teams.engine.sweeper.sweep_once()
        teams.clock.advance(minutes=5)
        await teams.engine.sweeper.sweep_once()

        def notices(c):
            return [p for p in c.posts() if p.thread == card_id]

        await teams.connector.wait_for(lambda c: len(notices(c)) >= 2)
        escalated, reminder = notices(teams.connector)[:2]
        assert "Escalated" in texts(escalated.card) and "judy" in texts(escalated.card)
        assert escalated.activity["text"] == "<at>judy</at>"
        assert escalated.activity["entities"] == [
            {
                "type": "mention",
                "text": "<at>judy</at>",
                "mentioned": {"id": aad("judy"), "name": "judy"},
            }
        ]
        assert "Reminder" in texts(reminder.card)
        mentioned = {e["mentioned"]["id"] for e in reminder.activity["entities"]}
        assert mentioned == {aad("bob"), aad("carol"), aad("judy")}  # escalation added judy
        for post in (escalated, reminder):
            assert_valid_card(post.card)


async def test_a_burst_is_paced_within_the_conversation_limits(migrated_db_url):
    async with running_teams(migrated_db_url, REMINDING) as teams:
        await subscribed(teams)
        run_id = await start_run(teams)
        _, card_id = await card_posted(teams, run_id)

        await queue_notices(teams, run_id, step_results(run_id, 16))
        await teams.connector.wait_for(
            lambda c: len([p for p in c.posts() if p.thread == card_id]) == 16, timeout=20
        )
        assert teams.connector.throttled == []  # never over a limit, so never a 429
        assert teams.connector.peak_per_second <= 7
        times = [p.at for p in teams.connector.calls if p.conversation == CHANNEL]
        for i in range(len(times) - 8):
            assert times[i + 8] - times[i] >= 2.0 - 0.05  # 8 per 2 s


@pytest.mark.parametrize("status", [429, 412, 502, 504])
async def test_transient_failures_are_retried(migrated_db_url, status):
    async with running_teams(migrated_db_url, REMINDING) as teams:
        await subscribed(teams)
        teams.connector.fail_next(status, times=2, retry_after=7 if status == 429 else None)
        run_id = await start_run(teams)

        async def retrying():
            rows = await outbox_status(teams, run_id)
            return rows if rows and rows[0][1] == "pending" and rows[0][2] else None

        (kind, _, error), *_ = await wait_for(retrying)
        assert kind == "card" and str(status) in error
        started = teams.engine.clock.now()
        # Time moves a second at a time; the card goes out once both retries are due.
        posted = []
        for _ in range(40):
            posted = await within(
                lambda: teams.engine.store.chat_messages(run_id=run_id, kind="card"), 0.05
            )
            if posted:
                break
            teams.clock.advance(seconds=1)
            teams.engine.wake_outbox()
        assert posted
        waited = (teams.engine.clock.now() - started).total_seconds()
        # 429: what Retry-After said, twice; the others back off 2 s, then 4 s.
        assert waited >= (14 if status == 429 else 6)
        assert [s for _, s in teams.connector.failed] == [status, status]

        async def sent():
            (row, state, _), *_ = await teams.engine.store.outbox_messages(run_id=run_id)
            return row if state == "sent" else None

        # Being told to wait (429 Retry-After) is pacing, not a failed attempt.
        assert (await wait_for(sent)).attempts == (1 if status == 429 else 3)


async def test_client_errors_and_unknown_names_fail_for_good(migrated_db_url):
    flow = REMINDING.replace("channels: [teams:ops]", "channels: [teams:ops, teams:nowhere]")
    async with running_teams(migrated_db_url, flow) as teams:
        await subscribed(teams)
        teams.connector.fail_next(403)
        run_id = await start_run(teams)

        async def settled():
            rows = await outbox_status(teams, run_id)
            return rows if rows and all(s == "failed" for _, s, _ in rows) else None

        rows = await wait_for(settled)
        errors = " | ".join(e or "" for _, _, e in rows)
        assert "403" in errors
        assert "no Teams conversation is named 'nowhere'" in errors
        assert "subscribe nowhere" in errors


async def test_a_personal_chat_gets_cards_and_notices_without_threads(migrated_db_url):
    chat = "a:1Xk3PersonalChatWithAlice"
    flow = REMINDING.replace("teams:ops", "teams:alice-dm")
    async with running_teams(migrated_db_url, flow) as teams:
        await teams.install(chat, kind="personal", by="alice")
        await teams.say("subscribe alice-dm", as_="alice", conversation=chat, kind="personal")
        run_id = await start_run(teams)
        request_id, card_id = await card_posted(teams, run_id)
        assert await teams.engine.store.chat_thread(run_id, "teams:alice-dm") is None

        _, body = await teams.click(
            "grant", request_id, as_="bob", card=card_id, conversation=chat, kind="personal"
        )
        assert verbs(body["value"]) == []
        await teams.connector.wait_for(lambda c: c.updates(card_id) and len(c.posts(chat)) >= 4)
        assert all(p.thread is None for p in teams.connector.posts(chat))
        assert all(p.activity["recipient"]["id"] != BOT["id"] for p in teams.connector.posts())


def test_pacing_holds_every_window():
    now = [0.0]
    pacing = Pacing(now=lambda: now[0])
    sent: list[float] = []
    while now[0] < 40:
        if pacing.try_acquire("c") == 0:
            sent.append(now[0])
        now[0] += 0.01
    for count, seconds in ((7, 1.0), (8, 2.0), (60, 30.0)):
        for i in range(len(sent) - count):
            assert sent[i + count] - sent[i] >= seconds - 1e-9
    assert len(sent) >= 60  # and no slower than the limits make it


async def test_a_call_counts_from_its_answer_however_long_it_took_to_leave():
    """The service counts a call when it arrives, which can be well after it was let through
    (the first proactive send waits for a token): windows kept by answer times are never early."""
    now = [0.0]
    pacing = Pacing(((2, 1.0),), now=lambda: now[0])  # 2 calls per second
    with pytest.raises(OSError):
        async with pacing.call("c"):
            now[0] = 0.5  # let through at 0; it left and was answered (a failure) at 0.5
            raise OSError("connection reset")
    now[0] = 0.6
    async with pacing.call("c"):
        pass
    # The third call waits until 1 s after 0.5, the first call's answer (counted from 0, when
    # it was let through, it would go half a second early, and the service would answer 429).
    assert pacing.wait_time("c") == pytest.approx(0.5 + 1.0 + MARGIN - 0.6)


async def test_pacing_refuses_long_waits_and_shares_the_app_limit():
    now = [0.0]
    pacing = Pacing(now=lambda: now[0])
    for i in range(30):
        async with pacing.call(f"conversation-{i}"):
            pass
    assert 0 < pacing.wait_time("conversation-31") <= 1.0 + MARGIN  # ~30 requests/s per app
    now[0] = 2.0
    for _ in range(8):
        async with pacing.call("busy", max_wait=10):
            pass
        now[0] += 0.2
    with pytest.raises(Throttled):
        async with pacing.call("busy", max_wait=0.05):
            pass
