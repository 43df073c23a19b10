"""The sweeper's batch statements and ``engine.domain.decisions.expire`` agree.

Expiry is the one decision the store applies set-based (a sweep expires hundreds of requests in
one statement, which cannot call the domain's function row by row): this runs both on the same
request, for every request status by ``timeoutBehavior`` by the instant against the deadline,
and compares what each does. On SQLite, and on PostgreSQL when it is configured."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from engine.adapters.store import SqlStore
from engine.domain import decisions, notify
from engine.domain.model import (
    JournalEvent,
    NewEvent,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
)
from engine.domain.records import NewRun

CREATED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
DEADLINE = CREATED + timedelta(minutes=30)
EDGES = {
    "before": DEADLINE - timedelta(microseconds=1),
    "at": DEADLINE,  # the instant itself is too late
    "after": DEADLINE + timedelta(minutes=5),
}
CASES = list(itertools.product(TakeoverStatus, TimeoutBehavior, EDGES))


async def waiting_on(
    store: SqlStore, status: TakeoverStatus, behavior: TimeoutBehavior
) -> TakeoverRequest:
    """A waiting run with one request in ``status``, written directly by the store; the request
    as the store reads it back."""
    decided = status != TakeoverStatus.PENDING
    request = TakeoverRequest(
        id="tk-1",
        run_id="run-1",
        step_id="approve",
        kind=TakeoverKind.NODE,
        status=status,
        reason="Pay 10",
        created_at=CREATED,
        expires_at=DEADLINE,
        approvers=("bob",),
        timeout_behavior=behavior,
        channels=("web", "slack:#ops"),
        decided_by="carol" if decided else None,
        decided_at=CREATED + timedelta(minutes=1) if decided else None,
        requested_by="dave",  # told in his own chat (engine.domain.notify.REQUESTER)
        details={notify.REQUESTER: {"person": "dave", "channels": ["slack:@dave"]}},
    )
    await store.create_run(
        NewRun(id="run-1", workflow="pay", input={"amount": 10}, status=RunStatus.WAITING),
        CREATED,
        [
            NewEvent(JournalEvent.STEP_STARTED, "approve", {"nodeType": "approval"}),
            NewEvent(JournalEvent.TAKEOVER_REQUESTED, "approve", {"requestId": "tk-1"}),
            NewEvent(JournalEvent.RUN_WAITING, "approve", {"requestId": "tk-1"}),
        ],
        takeover=request,
    )
    return await store.get_takeover("tk-1")


@pytest.mark.parametrize(
    ("status", "behavior", "edge"), CASES, ids=["-".join(map(str, c)) for c in CASES]
)
async def test_the_batch_expires_what_expire_expires(
    store: SqlStore, status: TakeoverStatus, behavior: TimeoutBehavior, edge: str
) -> None:
    now = EDGES[edge]
    read = await waiting_on(store, status, behavior)
    journal_before = await store.journal("run-1")

    outcome = decisions.expire(read, now)
    swept = await store.expire_due(now, outbox=notify.card_changed)

    after = await store.get_takeover("tk-1")
    run = await store.get_run("run-1")
    written = [(e.event, e.step_id, e.data) for e in (await store.journal("run-1"))]
    new = written[len(journal_before) :]
    if outcome is None:
        assert swept == []
        assert after == read
        assert new == []
        assert run.status == RunStatus.WAITING
        return
    assert swept == [outcome.request]
    assert after == outcome.request
    assert new == [(e.event, e.step_id, e.data) for e in outcome.events]
    assert outcome.back_to_work and run.status == RunStatus.QUEUED
    assert notify.card_changed(swept[0]) == list(outcome.outbox)
    told = [(m.channel, m.payload["notice"]) for m in outcome.outbox if "requester" in m.payload]
    assert told == [("slack:@dave", "expired")]
