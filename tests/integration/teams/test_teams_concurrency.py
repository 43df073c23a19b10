"""100 concurrent Approve clicks from 10 people on one request, each invoke delivered twice (as
Teams retries): exactly one decision, one execution, one update per state for everyone."""

from __future__ import annotations

import asyncio
import random

from teamsharness import (
    APPROVERS,
    FLOW,
    card_posted,
    running_teams,
    start_run,
    subscribed,
    texts,
    verbs,
)

from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from tests.support.engines import wait_status
from tests.support.waiting import quiet


async def test_one_decision_and_one_execution_under_100_concurrent_invokes(migrated_db_url):
    async with running_teams(migrated_db_url, FLOW) as teams:
        await subscribed(teams)
        run_id = await start_run(teams)
        request_id, card_id = await card_posted(teams, run_id)

        clickers = (APPROVERS * 12)[:10]  # 10 people (finance has 9: one clicks twice as much)
        invokes = [
            teams.click_activity("grant", request_id, as_=who, card=card_id)
            for who in clickers
            for _ in range(10)
        ]
        deliveries = [a for a in invokes for _ in range(2)]  # every invoke arrives twice
        random.Random(6).shuffle(deliveries)
        answers = await asyncio.gather(*(teams.post(a) for a in deliveries))

        assert {status for status, _ in answers} == {200}
        cards = [body["value"] for _, body in answers]
        assert all(verbs(card) == [] for card in cards)  # everyone sees it decided
        winners = [c for c in cards if not texts(c["body"][0]).startswith("Already decided")]
        losers = [c for c in cards if texts(c["body"][0]).startswith("Already decided")]
        assert len(winners) == 1 and len(losers) == 199

        request = await teams.engine.store.get_takeover(request_id)
        assert request.status == TakeoverStatus.RELEASED
        assert len(request.votes) == 1
        assert all(f"Already decided by {request.decided_by}" in texts(c) for c in losers)

        await wait_status(teams.engine, run_id, RunStatus.COMPLETED)
        ledger = await teams.engine.store.ledger(run_id=run_id)
        assert [r["action"] for r in ledger] == ["lookup", "refund"]  # executed once
        journal = await teams.engine.store.journal(run_id)
        granted = [e for e in journal if e.event == JournalEvent.TAKEOVER_GRANTED]
        assert len(granted) == 1

        await teams.connector.wait_for(lambda c: c.updates(card_id))
        await quiet(0.3)  # nothing more should follow
        assert len(teams.connector.updates(card_id)) == 1
        assert teams.connector.throttled == []
