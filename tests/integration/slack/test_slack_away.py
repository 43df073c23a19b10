"""Delegation end to end through Slack: alice sets it with ``/signoff away until ... delegate
@bob`` (signed requests to the real app, Slack's Web API faked over HTTP), a request that
would go to her goes to bob too (his own DM card says for whom), bob's approval counts as
alice's toward a 2-of-{alice, carol} quorum, alice's own click is not counted twice, carol's
completes it; and once the absence ends (the injected clock), a new request asks alice and
carol alone. Then the words' other forms: show, end, refusals."""

from __future__ import annotations

import json

from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.fakes.slack import Message
from tests.integration.slack.harness import USERS, SlackHarness, running_slack
from tests.support.clock import ManualClock
from tests.support.engines import wait_for, wait_status

FLOWS = """
pay:
  nodes:
    - {id: approve, type: approval, reason: "Pay invoice {{ input.n }}", approvers: [alice, carol],
       approvalsRequired: 2, channels: ["slack:dm"], timeoutMinutes: 1440}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {n: 1}}
"""


async def _cards(h: SlackHarness, person: str, count: int) -> list[Message]:
    """``person``'s first ``count`` approval cards in their DM, once they are there."""

    async def there() -> list[Message] | None:
        roots = [m for m in h.slack.dm(USERS[person]) if m.thread_ts is None]
        return roots if len(roots) >= count else None

    found: list[Message] = await wait_for(there)
    return found


async def test_set_in_slack_routed_approved_by_the_delegate_counted_once_then_restored(
    migrated_db_url: str,
) -> None:
    clock = ManualClock()  # 2026-01-01 12:00 UTC
    async with running_slack(migrated_db_url, FLOWS, clock=clock) as h:
        status, body, _ = await h.command(
            USERS["alice"], "away until 2026-01-08 delegate <@U0BOB0001|bob>"
        )
        assert status == 200 and body.get("response_type") != "in_channel"
        assert body["text"].startswith(
            "You're away until 2026-01-08 00:00 UTC: bob decides for you meanwhile"
        )
        _, shown, _ = await h.command(USERS["alice"], "away")
        assert shown["text"] == "You're away until 2026-01-08 00:00 UTC: bob decides for you."

        run_id = await h.start("pay", {"n": 1})
        request = await h.request_of(run_id)
        assert request.approvers == ("alice", "carol", "bob")
        journal = await h.engine.store.journal(run_id)
        [delegated] = [e for e in journal if e.event == JournalEvent.TAKEOVER_DELEGATED]
        assert delegated.data["delegates"][0]["for"] == "alice"

        [bobs] = await _cards(h, "bob", 1)
        assert "bob decides for alice, who is away" in json.dumps(bobs.blocks)
        await _cards(h, "alice", 1)  # she is still asked: she may decide after all
        await _cards(h, "carol", 1)

        status, _ = await h.click(USERS["bob"], "signoff_grant", request.id, message_ts=bobs.ts)
        assert status == 200
        granted = await h.request_of(run_id)
        assert granted.status == TakeoverStatus.PENDING and len(granted.votes) == 1

        # alice clicks after all: her seat is bob's vote already, so nothing is counted
        status, key = await h.click(USERS["alice"], "signoff_grant", request.id)
        assert status == 200
        assert "already granted this request for alice" in await h.wait_told(key)
        assert len((await h.request_of(run_id)).votes) == 1

        status, _ = await h.click(USERS["carol"], "signoff_grant", request.id)
        assert status == 200
        await wait_status(h.engine, run_id, RunStatus.COMPLETED)
        done = await h.request_of(run_id)
        assert done.status == TakeoverStatus.RELEASED
        assert [v.person for v in done.votes] == ["bob", "carol"]

        # The absence ends: a new request goes to alice and carol, and bob gets no card.
        clock.advance(days=7)
        _, shown, _ = await h.command(USERS["alice"], "away")
        assert shown["text"] == "You're not away: requests come to you."
        later = await h.start("pay", {"n": 2})
        after = await h.request_of(later)
        assert after.approvers == ("alice", "carol")
        await _cards(h, "alice", 2)
        await _cards(h, "carol", 2)
        assert len([m for m in h.slack.dm(USERS["bob"]) if m.thread_ts is None]) == 1
        status, _ = await h.click(USERS["bob"], "signoff_grant", after.id)
        assert len((await h.request_of(later)).votes) == 0  # bob decides nothing of it


async def test_away_off_refusals_and_usage(migrated_db_url: str) -> None:
    async with running_slack(migrated_db_url, FLOWS) as h:
        _, body, _ = await h.command(USERS["bob"], "away off")
        assert body["text"] == "You weren't away, so nothing changed."
        for text, said in (
            ("away until 2026-01-08 delegate <@U0STRANGER|zed>", "doesn't know who"),
            ("away until 2026-01-08 delegate @mallory", "doesn't know who @mallory is"),
            ("away until 2025-12-24 delegate @carol", "must end in the future"),
            ("away until someday delegate @carol", "is no date"),
            ("away until 2026-01-08 delegate @bob", "someone else"),
            ("away until 2026-01-08", "Usage: away until"),
            ("away for good", "Usage: away until"),
        ):
            status, body, _ = await h.command(USERS["bob"], text)
            assert status == 200 and said in body["text"], (text, body)
            assert body.get("response_type") != "in_channel"
        assert await h.engine.store.absences(h.engine.clock.now()) == []

        # by name or email of people:, in either order
        _, body, _ = await h.command(
            USERS["bob"], "away delegate carol@example.com until 2026-01-03T09:00+01:00"
        )
        assert body["text"].startswith("You're away until 2026-01-03 08:00 UTC: carol decides")
        _, body, _ = await h.command(USERS["bob"], "away off")
        assert body["text"] == (
            "Welcome back: requests come to you again, and carol no longer gets them for you."
        )
        assert await h.engine.store.absences(h.engine.clock.now()) == []
        _, body, _ = await h.command("U0STRANGER", "away off")
        assert "not linked" in body["text"]
