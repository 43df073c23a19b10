"""Outbound delivery: per-channel pacing against Slack's rate limit, Retry-After, retries, and a
dedupe that survives a crash between a successful ``chat.postMessage`` and marking it sent."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.slack.api import SlackApi, error_code
from bot.slack.render import REPOSTED_CARD
from engine.adapters.clock import SystemClock
from engine.config.channels import SlackConfig
from tests.fakes.slack import FakeSlack
from tests.integration.slack.harness import CHANNEL, USERS, running_slack
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, wait_for
from tests.support.waiting import quiet

BURST_CHANNEL = "C0BURST00"
FLOWS = f"""
burst:
  nodes:
    - {{id: approve, type: approval, approvers: [finance], channels: ["slack:{BURST_CHANNEL}"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
refund:
  nodes:
    - {{id: approve, type: approval, approvers: [finance], channels: ["slack:{CHANNEL}"]}}
    - {{id: act, type: connector, connector: demo-ledger, action: note, args: {{n: 1}}}}
lost:
  nodes:
    - {{id: approve, type: approval, approvers: [finance], channels: ["slack:C0MISSING"]}}
"""


BURST = 40


async def delivered_once(h) -> None:
    """Once the clock has passed a row's due time, the running dispatcher and a direct
    ``deliver_due`` race for it: whichever claims it posts it, and the other finds nothing.
    Either way the card is posted exactly once."""
    await h.engine.dispatcher.deliver_due()

    async def posted() -> bool:
        return len(h.slack.posted(CHANNEL)) >= 1

    await wait_for(posted)
    assert len(h.slack.posted(CHANNEL)) == 1
    assert len(h.slack.calls_of("chat.postMessage")) == 2  # the refused one and this one


async def outbox_rows(h, status: str | None = None) -> list:
    return await h.engine.store.outbox_messages(status=status)


async def test_a_burst_of_cards_respects_the_rate_limit_and_posts_each_once(
    migrated_db_url: str,
) -> None:
    # The fake allows 8 posts per 3 s per channel; the sink is told it may post every 4 ms,
    # so it runs into the limit and must wait out each Retry-After (1 s). The window is wide
    # so that even a crowded machine posts faster than the limit: with 8 per second, a CI run
    # beside four other suites (load 11 on 2 cores) posted slower and never met it.
    async with running_slack(
        migrated_db_url, FLOWS, rate=8, window=3.0, min_interval=0.004, clock=SystemClock()
    ) as h:
        started = time.perf_counter()
        runs = await asyncio.gather(
            *(h.engine.runs.start_run("burst", {"n": i}, AGENT) for i in range(BURST))
        )

        async def all_posted() -> bool:
            return len(h.slack.posted(BURST_CHANNEL)) >= BURST

        await wait_for(all_posted, timeout=120)
        elapsed = time.perf_counter() - started
        await quiet(0.5)  # nothing more arrives
        print(f"\n{BURST} cards in {elapsed:.1f} s, {h.slack.rate_limited} answers 429")

        posted = h.slack.posted(BURST_CHANNEL)
        assert len(posted) == BURST
        assert h.slack.duplicates() == {}
        assert {m.dedupe for m in posted} == {
            f"card:{r.id}:slack:{BURST_CHANNEL}"
            for r in await h.engine.store.list_takeovers(limit=1000)
        }
        assert h.slack.rate_limited >= 1, "the burst never reached the fake's limit"
        assert h.slack.violations == []  # nothing was sent while Slack said to wait
        assert len({run.id for run, _ in runs}) == BURST
        sent = await outbox_rows(h, "sent")
        assert len([m for m, _, _ in sent if m.kind == "card"]) == BURST


async def test_a_crash_after_posting_posts_one_marked_copy_and_loses_nothing(
    migrated_db_url: str,
) -> None:
    """Slack posts the card and the answer never arrives (the process dies before recording
    it). Signoff reads no history to find it: the next delivery posts the card once more,
    marked as replacing an earlier copy that may show above, and keeps that copy up to date."""
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        h.slack.post_delay = 30.0  # Slack posts the card, and the answer never arrives
        run_id = (await h.engine.runs.start_run("refund", {}, AGENT))[0].id

        async def posted() -> bool:
            return len(h.slack.posted(CHANNEL)) == 1

        await wait_for(posted)
        await h.engine.dispatcher.stop()  # the process dies before marking the row sent
        ((row, status, _),) = [r for r in await outbox_rows(h) if r[0].kind == "card"]
        assert status == "pending" and row.attempts == 0
        assert await h.engine.store.chat_messages(run_id=run_id, kind="card") == []

        # Another process takes over once the claim lapses: same row, attempts still 0.
        h.slack.post_delay = 0.0
        clock.advance(seconds=61)
        assert await h.engine.dispatcher.deliver_due() >= 1
        first, second = h.slack.posted(CHANNEL)
        assert first.dedupe == second.dedupe  # one visible duplicate, no more
        assert REPOSTED_CARD not in first.text
        assert second.text.startswith(REPOSTED_CARD)
        assert second.blocks is not None and REPOSTED_CARD in str(second.blocks[0])
        assert h.slack.history_reads() == []
        (card,) = await h.engine.store.chat_messages(run_id=run_id, kind="card")
        assert card.message_ref == second.ts
        thread = await h.engine.store.chat_thread(run_id, f"slack:{CHANNEL}")
        assert thread is not None and thread.thread_ref == second.ts
        ((row, status, _),) = [r for r in await outbox_rows(h) if r[0].kind == "card"]
        assert status == "sent"

        # Either copy's buttons decide the same request once; the kept copy is updated and
        # still says it replaces the other.
        request = await h.request_of(run_id)
        status, _key = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=first.ts)
        assert status == 200
        await h.engine.dispatcher.deliver_due()

        async def updated() -> bool:
            return second.updates >= 1

        await wait_for(updated)
        assert second.updates == 1 and second.text.startswith(REPOSTED_CARD)
        assert "Approved" in str(second.blocks) and first.updates == 0
        status, late = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=first.ts)
        assert "Already approved" in await h.wait_told(late)


async def test_server_errors_are_retried_without_searching_and_without_duplicates(
    migrated_db_url: str,
) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        h.slack.fail_next("chat.postMessage", "internal_error", status=500)
        await h.engine.runs.start_run("refund", {}, AGENT)

        async def failed_once() -> list:
            rows = [r for r in await outbox_rows(h) if r[0].kind == "card" and r[0].attempts]
            return rows

        ((_, status, error),) = await wait_for(failed_once)
        assert status == "pending" and "internal_error" in (error or "")
        assert h.slack.posted(CHANNEL) == []

        clock.advance(seconds=3)  # past the first backoff (2 s)
        await delivered_once(h)
        # Slack answered the first attempt, so nothing could have been posted: no mark.
        (card,) = h.slack.posted(CHANNEL)
        assert REPOSTED_CARD not in card.text


async def test_retry_after_from_slack_is_obeyed(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        h.slack.fail_next("chat.postMessage", "ratelimited", status=429)
        await h.engine.runs.start_run("refund", {}, AGENT)

        async def limited() -> list:
            return [r for r in await outbox_rows(h) if r[0].kind == "card" and r[2]]

        ((record, status, error),) = await wait_for(limited)
        assert status == "pending" and "Retry-After 1 s" in (error or "")
        assert record.attempts == 0  # being paced is not a failed attempt
        assert await h.engine.dispatcher.deliver_due() == 0  # not due before Retry-After
        clock.advance(seconds=1.5)
        await delivered_once(h)
        assert h.slack.violations == []


async def test_errors_that_cannot_succeed_give_up_at_once(migrated_db_url: str) -> None:
    clock = ManualClock()
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        h.slack.missing_channels.add("C0MISSING")

        async def failed(count: int) -> list:
            async def check() -> list | None:
                rows = await outbox_rows(h, "failed")
                return rows if len(rows) >= count else None

            found: list = await wait_for(check)
            return found

        await h.engine.runs.start_run("lost", {}, AGENT)
        await failed(1)
        h.slack.fail_next("chat.postMessage", "invalid_blocks")
        await h.engine.runs.start_run("refund", {}, AGENT)
        rows = await failed(2)
        errors = [error or "" for _, _, error in rows]
        assert any("channel_not_found" in e for e in errors)
        assert any("invalid_blocks" in e for e in errors)
        assert all(row.attempts == 1 for row, _, _ in rows)
        clock.advance(hours=1)
        await h.engine.dispatcher.deliver_due()
        assert len(h.slack.calls_of("chat.postMessage")) == 2  # never tried again


async def test_the_fake_refuses_what_slack_refuses() -> None:
    """The fake checks Block Kit limits and the token as Slack does (through our own client)."""
    async with FakeSlack() as slack:
        api = SlackApi(SlackConfig("xoxb-fake-token", "secret", slack.api_url))
        too_many = {"text": "x", "blocks": [{"type": "divider"}] * 51}
        long_header = {
            "text": "x",
            "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        }
        try:
            for message in (too_many, long_header):
                with pytest.raises(Exception) as refused:
                    await api.post("C0ANY", message, thread_ts=None, dedupe_key="k")
                assert error_code(refused.value) == "invalid_blocks"  # type: ignore[arg-type]
            assert slack.posted() == []
            wrong = SlackApi(SlackConfig("xoxb-wrong", "secret", slack.api_url))
            with pytest.raises(Exception) as refused:
                await wrong.post("C0ANY", {"text": "x"}, thread_ts=None, dedupe_key="k")
            assert error_code(refused.value) == "invalid_auth"  # type: ignore[arg-type]
            await wrong.close()
            await api.post("C0ANY", {"text": "fine"}, thread_ts=None, dedupe_key="k")
            # Reading history: once a minute for apps outside Slack's Marketplace.
            await api.client.conversations_history(channel="C0ANY")
            with pytest.raises(Exception) as refused:
                await api.client.conversations_history(channel="C0ANY")
            assert error_code(refused.value) == "ratelimited"  # type: ignore[arg-type]
            assert refused.value.response.status_code == 429  # type: ignore[attr-defined]
            # A direct message is opened first; one that was not is not found.
            with pytest.raises(Exception) as refused:
                await api.post("D00000001", {"text": "x"}, thread_ts=None, dedupe_key="d")
            assert error_code(refused.value) == "channel_not_found"  # type: ignore[arg-type]
            assert await api.open_dm("U0ALICE01") == "D00000001"
            await api.post("D00000001", {"text": "x"}, thread_ts=None, dedupe_key="d")
        finally:
            await api.close()


async def test_a_decisions_card_update_goes_before_queued_new_cards(migrated_db_url: str) -> None:
    """A busy channel: 39 new cards claimed and going out behind the pacing. A decision on the
    first card updates it next, not after the other 39 (it waited 42 s behind them), and its
    notice in the card's thread follows the update at once."""
    async with running_slack(
        migrated_db_url, FLOWS, rate=8, min_interval=0.125, clock=SystemClock()
    ) as h:
        h.slack.hold_posts = asyncio.Event()  # the first post hangs: the rest queue behind it
        await h.engine.runs.start_run("burst", {"n": 0}, AGENT)

        async def first_posted() -> bool:
            return len(h.slack.posted(BURST_CHANNEL)) == 1

        await wait_for(first_posted, timeout=60)
        await asyncio.gather(
            *(h.engine.runs.start_run("burst", {"n": i}, AGENT) for i in range(39))
        )

        async def queued() -> bool:
            rows = await outbox_rows(h)
            return len([m for m, _, _ in rows if m.kind == "card"]) == 40

        await wait_for(queued, timeout=60)
        h.slack.hold_posts.set()  # the first post returns; the other 39 go out in one batch

        async def sending() -> bool:
            return len(h.slack.posted(BURST_CHANNEL)) >= 4

        await wait_for(sending, timeout=60)
        first = h.slack.posted(BURST_CHANNEL)[0]
        request_id = str(first.dedupe).split(":")[1]
        status, _ = await h.click(USERS["bob"], "signoff_grant", request_id, message_ts=first.ts)
        assert status == 200

        async def updated() -> bool:
            return first.updates >= 1

        await wait_for(updated, timeout=60)
        cards_then = len([m for m in h.slack.posted(BURST_CHANNEL) if m.thread_ts is None])

        async def noticed() -> list:
            return [m for m in h.slack.posted(BURST_CHANNEL) if m.thread_ts == first.ts]

        (notice,) = await wait_for(noticed, timeout=60)
        assert notice.dedupe is not None and notice.dedupe.startswith("notice:decision:")
        # The decision's notice goes with its card update: the very next call into the channel,
        # before any of the new cards still queued (it came 71-83 s late behind 40 of them).
        into_channel = [
            c
            for c in h.slack.calls
            if c.method in ("chat.postMessage", "chat.update")
            and c.args.get("channel") == BURST_CHANNEL
            and c.error is None
        ]
        (update_at,) = [i for i, c in enumerate(into_channel) if c.method == "chat.update"]
        after = into_channel[update_at + 1]
        assert after.method == "chat.postMessage" and after.args.get("thread_ts") == first.ts

        async def all_posted() -> bool:
            return len([m for m in h.slack.posted(BURST_CHANNEL) if m.thread_ts is None]) >= 40

        await wait_for(all_posted, timeout=60)
        print(f"\nthe update went out after {cards_then} of 40 cards")
        assert cards_then <= 15, f"the update waited for {cards_then - 4} new cards"
        assert h.slack.violations == [] and h.slack.duplicates() == {}
