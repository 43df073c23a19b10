"""A run put back to work by this process (a new run, a decision) is claimed for one of its
free worker slots in the same transaction and advanced here at once: no queue round trip, no
claim. Without a free slot it is queued as before, and a run that has not parked keeps its
status and lease (no second worker ever advances it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from engine import assembly
from engine.assembly import Engine
from engine.domain import decisions
from engine.domain.model import Role, RunStatus, TakeoverStatus
from engine.domain.records import Adopt, NewRun
from tests.support.engines import AGENT, make_engine, person, wait_for, wait_status
from tests.support.waiting import quiet

FLOW = """
flow:
  nodes:
    - {id: approve, type: approval, channels: [web]}
    - {id: act, type: connector, connector: demo-ledger, action: note, args: {text: hi}}
"""
# Polling set to a minute: only a claim made at once (or a wake-up) could move a queued run.
SLOW_POLL = "{workers: 4, leaseSeconds: 30, pollSeconds: 60}"
ONE_SLOT = "{workers: 1, leaseSeconds: 30, pollSeconds: 60}"
ONE_SLOT_FAST_POLL = "{workers: 1, leaseSeconds: 30, pollSeconds: 0.05}"


def count_claims(engine: Engine) -> list[int]:
    """The sizes of the non-empty claims the engine's workers make from now on."""
    sizes: list[int] = []
    claim = engine.store.claim_runs

    async def counted(*args: Any, **kwargs: Any) -> list[str]:
        ids = await claim(*args, **kwargs)
        if ids:
            sizes.append(len(ids))
        return ids

    engine.store.claim_runs = counted  # type: ignore[method-assign]
    return sizes


async def parked(engine: Engine) -> tuple[str, str]:
    """A run started through ``engine`` and parked at its approval: (run id, request id)."""
    run, _ = await engine.runs.start_run("flow", {}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)

    # The park is committed before the task that parked the run has ended. A decision that
    # claims the run in between finds that task still advancing it, and the run is advanced
    # once it ends, from what it reads (the task could have been one the lease ran out under,
    # still writing): these tests decide once it has ended.
    async def ended() -> bool:
        return not engine.workers.active

    await wait_for(ended)
    (request,) = await engine.store.list_takeovers(run_id=run.id)
    return run.id, request.id


def count_reads(engine: Engine) -> list[str]:
    """The runs the engine's workers read (run and journal) from now on."""
    reads: list[str] = []
    read = engine.store.run_and_journal

    async def counted(run_id: str) -> Any:
        reads.append(run_id)
        return await read(run_id)

    engine.store.run_and_journal = counted  # type: ignore[method-assign]
    return reads


async def test_new_run_and_decision_are_advanced_here_without_a_claim(
    migrated_db_url: str,
) -> None:
    """Neither is claimed nor read again: the worker starts from the run and journal as the
    transaction that claimed it for this process left them."""
    engine = make_engine(migrated_db_url, FLOW, server=SLOW_POLL)
    claims = count_claims(engine)
    reads = count_reads(engine)
    await engine.start()
    try:
        run_id, request_id = await parked(engine)
        await engine.approvals.grant(request_id, person("bob"), release=True)
        await wait_status(engine, run_id, RunStatus.COMPLETED)
        events = [e.event.value for e in await engine.store.journal(run_id)]
    finally:
        await engine.stop()
    assert claims == [] and reads == []
    assert events == [
        "run_started",
        "step_started",
        "takeover_requested",
        "run_waiting",
        "takeover_granted",
        "takeover_released",
        "run_resumed",
        "step_completed",
        "step_started",
        "step_completed",
        "run_completed",
    ]


async def test_without_a_free_slot_the_decision_queues_the_run(migrated_db_url: str) -> None:
    front = make_engine(migrated_db_url, FLOW, server=SLOW_POLL)  # runs no workers: no slot
    run, _ = await front.runs.start_run("flow", {}, AGENT)
    assert run.status == RunStatus.QUEUED and run.lease_owner is None
    back = make_engine(migrated_db_url, FLOW, server=SLOW_POLL, name="back")
    claims = count_claims(back)
    await back.start()  # claims the queued run at start
    try:
        await wait_status(back, run.id, RunStatus.WAITING)
        (request,) = await front.store.list_takeovers(run_id=run.id)
        await front.approvals.grant(request.id, person("bob"), release=True)
        # Queued for any replica, not claimed by the deciding one; on PostgreSQL the
        # notification may already have let ``back`` claim it.
        assert (await front.store.get_run(run.id)).lease_owner in (None, "back-worker")
        back.wake()  # what the notification does on PostgreSQL
        await wait_status(back, run.id, RunStatus.COMPLETED)
    finally:
        await back.stop()
        await front.stop()
    assert claims == [1, 1]


async def test_a_run_that_has_not_parked_keeps_its_worker(migrated_db_url: str) -> None:
    """A manual takeover released before the run reached it: the run is not claimed again for
    the deciding process while another worker holds it."""
    engine = make_engine(migrated_db_url, FLOW)
    now = engine.clock.now()
    held = Adopt("other-worker", now + timedelta(seconds=30))
    await engine.store.create_run(NewRun(id="r-held", workflow="flow", input={}, adopt=held), now)
    admin = person("alice", Role.ADMIN)
    request = await engine.approvals.request("r-held", admin, reason="look first")
    await engine.approvals.grant(request.id, admin)
    offer = Adopt("this-worker", now + timedelta(seconds=30), run_id="stale")
    release = partial(decisions.release, person="alice", now=now)
    await engine.store.apply_decision(request.id, release, now, adopt=offer)
    run = await engine.store.get_run("r-held")
    await engine.stop()
    assert offer.run_id is None
    assert (run.status, run.lease_owner) == (RunStatus.RUNNING, "other-worker")


@pytest.mark.parametrize("verb", ["deny", "release"])
async def test_deny_and_release_resume_here_too(migrated_db_url: str, verb: str) -> None:
    flow = FLOW.replace("channels: [web]}", "channels: [web], onDeny: act}")
    engine = make_engine(migrated_db_url, flow, server=SLOW_POLL)
    claims = count_claims(engine)
    await engine.start()
    try:
        run_id, request_id = await parked(engine)
        if verb == "deny":
            await engine.approvals.deny(request_id, person("bob"), notes="no")
        else:
            await engine.approvals.grant(request_id, person("bob"))
            await engine.approvals.release(request_id, person("bob"))
        await wait_status(engine, run_id, RunStatus.COMPLETED)
    finally:
        await engine.stop()
    assert claims == []


async def test_the_decision_starts_the_next_step_for_its_worker(migrated_db_url: str) -> None:
    """The decision that claims the run here also appends the approval step's completion and
    the next action's ``step_started``: the worker calls the action with no commit of its
    own before it, and its one commit is the result (and the run's end)."""
    engine = make_engine(migrated_db_url, FLOW, server=SLOW_POLL)
    await engine.start()
    try:
        run_id, request_id = await parked(engine)
        appends: list[list[str]] = []
        append = engine.store.append_events

        async def counted(run: str, owner: str, events: Any, *args: Any, **kwargs: Any) -> Any:
            appends.append([e.event.value for e in events])
            return await append(run, owner, events, *args, **kwargs)

        engine.store.append_events = counted  # type: ignore[method-assign]
        await engine.approvals.grant(request_id, person("bob"), release=True)
        await wait_status(engine, run_id, RunStatus.COMPLETED)
        journal = await engine.store.journal(run_id)
    finally:
        await engine.stop()
    assert appends == [["step_completed", "run_completed"]]
    decided = [e for e in journal if e.event.value != "run_started"][3:8]
    assert [(e.event.value, e.step_id) for e in decided] == [
        ("takeover_granted", "approve"),
        ("takeover_released", "approve"),
        ("run_resumed", "approve"),
        ("step_completed", "approve"),
        ("step_started", "act"),
    ]


async def test_the_worker_is_handed_the_run_and_journal_as_committed(
    migrated_db_url: str,
) -> None:
    """The claiming decision builds the run and journal it hands the worker without reading
    them back: they equal what the database holds after its commit, event for event."""
    engine = make_engine(migrated_db_url, FLOW, server=SLOW_POLL)
    await engine.start()
    try:
        run_id, request_id = await parked(engine)
        now = engine.clock.now()
        # The offer of a worker slot that is not this engine's: nothing advances the run.
        offer = Adopt("elsewhere", now + timedelta(seconds=30), plan=engine.interpreter.resume_plan)
        grant = partial(decisions.grant, person="bob", now=now, release=True)
        await engine.store.apply_decision(request_id, grant, now, adopt=offer)
        stored_run, stored_journal = await engine.store.run_and_journal(run_id)
    finally:
        await engine.stop()
    assert offer.run_id == run_id and offer.written is not None
    handed_run, handed_journal = offer.written
    assert handed_run == stored_run
    assert (handed_run.status, handed_run.lease_owner) == (RunStatus.RUNNING, "elsewhere")
    assert handed_journal == stored_journal
    assert [e.event.value for e in stored_journal[-5:]] == [
        "takeover_granted",
        "takeover_released",
        "run_resumed",
        "step_completed",
        "step_started",
    ]


@dataclass
class Busy:
    """An engine with one worker slot, a run parked at its approval, and the slot taken."""

    engine: Engine
    held: Adopt  # the offer that took the slot
    claims: list[int]  # the engine's non-empty claims (``count_claims``)
    run_id: str
    request_id: str


@contextlib.asynccontextmanager
async def slot_busy(db_url: str, server: str = ONE_SLOT) -> AsyncIterator[Busy]:
    engine = make_engine(db_url, FLOW, server=server)
    claims = count_claims(engine)
    await engine.start()
    try:
        run_id, request_id = await parked(engine)

        # Until a claim made with a slot free has found nothing queued, a decision would not
        # wait for a slot. The parked run's task, ending, wakes such a claim; taken before it
        # counts its free slots, the slot would leave it nothing to learn (a CI failure).
        async def waits() -> bool:
            return engine.workers.waits_for_slots

        await wait_for(waits)
        held = engine.workers.offer()
        assert held is not None and engine.workers.offer() is None
        yield Busy(engine, held, claims, run_id, request_id)
    finally:
        await engine.stop()


async def test_with_every_slot_busy_a_decision_takes_the_first_slot_freed(
    migrated_db_url: str,
) -> None:
    """It waits for the slot rather than queue its run: the run resumes here, unclaimed."""
    async with slot_busy(migrated_db_url) as busy:
        decision = asyncio.create_task(
            busy.engine.approvals.grant(busy.request_id, person("bob"), release=True)
        )
        await asyncio.sleep(0)  # its first step: no slot, so it waits for one
        assert not decision.done()
        busy.engine.workers.settle(busy.held)  # the slot frees without a run
        after = await decision
        await wait_status(busy.engine, busy.run_id, RunStatus.COMPLETED)
    assert after.status == TakeoverStatus.RELEASED
    assert busy.claims == []


async def test_with_every_slot_busy_a_new_run_takes_the_first_slot_freed(
    migrated_db_url: str,
) -> None:
    """A start waits for a slot too (the server's back-pressure): its run is advanced here,
    unclaimed, rather than queued behind the ones already accepted."""
    async with slot_busy(migrated_db_url) as busy:
        start = asyncio.create_task(busy.engine.runs.start_run("flow", {}, AGENT))
        await asyncio.sleep(0)  # its first step: no slot, so it waits for one
        assert not start.done()
        busy.engine.workers.settle(busy.held)  # the slot frees without a run
        run, created = await start
        assert created and run.lease_owner == busy.engine.workers.owner
        await wait_status(busy.engine, run.id, RunStatus.WAITING)
    assert busy.claims == []


async def test_a_new_run_waits_no_longer_than_the_start_bound(
    migrated_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no slot freed in time, the run is queued (and the start answered) as before."""
    monkeypatch.setattr(assembly, "START_WAIT_SECONDS", 0.01)
    async with slot_busy(migrated_db_url) as busy:
        run, created = await busy.engine.runs.start_run("flow", {}, AGENT)
        assert created and run.status == RunStatus.QUEUED and run.lease_owner is None


async def test_behind_queued_runs_a_new_run_waits_for_a_slot_and_leaves_it_to_them(
    migrated_db_url: str,
) -> None:
    """A flood of starts cannot run ahead of the workers: behind queued runs a start is
    answered once a slot frees, and the slot goes to the oldest queued run."""
    async with slot_busy(migrated_db_url) as busy:
        busy.engine.wake()  # runs may be queued (another replica's, or a start that timed out)
        for _ in range(20):  # the claim loop's turn: it finds no free slot
            await asyncio.sleep(0)
        start = asyncio.create_task(busy.engine.runs.start_run("flow", {}, AGENT))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not start.done()  # paced: waiting for a slot to free
        busy.engine.workers.settle(busy.held)
        run, created = await start
        assert created and run.status == RunStatus.QUEUED and run.lease_owner is None
        await wait_status(busy.engine, run.id, RunStatus.WAITING)  # claimed in turn
    assert busy.claims == [1]


async def test_a_decision_waits_for_a_slot_no_longer_than_it_is_given(
    migrated_db_url: str,
) -> None:
    async with slot_busy(migrated_db_url) as busy:
        workers = busy.engine.workers
        assert await workers.offer_soon(seconds=0.01) is None
        workers.settle(busy.held)
        assert await workers.offer_soon(seconds=0.01) is not None  # free: at once


async def test_a_decision_does_not_wait_ahead_of_runs_that_may_be_queued(
    migrated_db_url: str,
) -> None:
    """Once runs were announced ready (and may be queued), a decision queues its run behind
    theirs at once; the freed slot claims it."""
    async with slot_busy(migrated_db_url) as busy:
        busy.engine.wake()  # what another replica's queued run does
        for _ in range(20):  # the claim loop's turn: it finds no free slot
            await asyncio.sleep(0)
        decision = asyncio.create_task(
            busy.engine.approvals.grant(busy.request_id, person("bob"), release=True)
        )
        await asyncio.sleep(0)  # its first step: no slot, and it does not wait for one
        busy.engine.workers.settle(busy.held)  # a slot a waiting decision would have taken
        await decision
        await wait_status(busy.engine, busy.run_id, RunStatus.COMPLETED)
    assert busy.claims == [1]  # queued, then claimed


async def test_polls_that_find_no_free_slot_do_not_stop_decisions_waiting(
    migrated_db_url: str,
) -> None:
    """A poll with every slot busy learns nothing of queued runs: decisions still wait for the
    first slot freed (under a burst, queueing them all from then on cost a claim each and
    made the burst's p99 five times longer)."""
    async with slot_busy(migrated_db_url, ONE_SLOT_FAST_POLL) as busy:
        await quiet(0.2)  # the claim loop polls (real time) a few times, every slot busy
        decision = asyncio.create_task(
            busy.engine.approvals.grant(busy.request_id, person("bob"), release=True)
        )
        await asyncio.sleep(0)
        assert not decision.done()  # waiting for a slot
        busy.engine.workers.settle(busy.held)
        await decision
        await wait_status(busy.engine, busy.run_id, RunStatus.COMPLETED)
    assert busy.claims == []  # resumed here, never queued


async def test_a_decision_told_of_a_slot_but_gone_passes_it_on(migrated_db_url: str) -> None:
    """The caller of the first decision in line went away (a cancelled request) after it was
    told: the next in line takes the slot, with no other slot freed."""
    async with slot_busy(migrated_db_url) as busy:
        workers = busy.engine.workers
        first = asyncio.create_task(workers.offer_soon(seconds=5))
        second = asyncio.create_task(workers.offer_soon(seconds=5))
        await asyncio.sleep(0)  # both wait, in that order
        workers.settle(busy.held)  # tells the first
        first.cancel()
        offer = await asyncio.wait_for(second, 1)
        workers.settle(offer)
    assert first.cancelled() and offer is not None


async def test_workers_stopping_send_waiting_decisions_to_the_queue_at_once(
    migrated_db_url: str,
) -> None:
    async with slot_busy(migrated_db_url) as busy:  # the slot is never given back
        waiting = asyncio.create_task(busy.engine.workers.offer_soon(seconds=60))
        await asyncio.sleep(0)
        stopping = asyncio.create_task(busy.engine.workers.stop())
        offer = await asyncio.wait_for(waiting, 5)
        await stopping
    assert offer is None
