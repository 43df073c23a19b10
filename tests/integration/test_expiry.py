"""Undecided requests expire at ``expiresAt`` and the run applies ``timeoutBehavior``. Time is a
``ManualClock`` moved by the test, and the sweep is called directly: nothing waits for the
background loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from engine.assembly import Engine
from engine.domain import notify
from engine.domain.errors import AlreadyDecided, StoreError
from engine.domain.model import JournalEvent, RunStatus, TakeoverStatus
from engine.services.workers import Sweeper
from tests.support.api import Api, running_api
from tests.support.clock import ManualClock
from tests.support.engines import AGENT, make_engine, person, wait_status

FLOWS = """
reject-fails:
  nodes:
    - {id: approve, type: approval, timeoutMinutes: 10}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
reject-follows-on-deny:
  nodes:
    - {id: approve, type: approval, timeoutMinutes: 10, timeoutBehavior: auto-reject,
       onDeny: refused}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}, next: end}
    - {id: refused, type: connector, connector: demo-ledger, action: note,
       args: {text: "timed out"}}
auto-approve:
  nodes:
    - {id: approve, type: approval, timeoutMinutes: 10, timeoutBehavior: auto-approve}
    - {id: refund, type: connector, connector: demo-ledger, action: refund,
       args: {order: "{{ input.order }}"}}
"""

# The background sweeper runs once at start and then not again within any time the tests move
# the (manual) clock by: the tests sweep.
NO_BACKGROUND_SWEEP = 10 * 365 * 24 * 3600.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def engine(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Engine]:
    eng = make_engine(
        migrated_db_url, FLOWS, clock=clock, sweep_interval_seconds=NO_BACKGROUND_SWEEP
    )
    await eng.start()
    yield eng
    await eng.stop()


async def parked(engine: Engine, workflow: str, order: str = "o-1") -> tuple[str, str]:
    run, _ = await engine.runs.start_run(workflow, {"order": order}, AGENT)
    await wait_status(engine, run.id, RunStatus.WAITING)
    (request,) = await engine.store.list_takeovers(run_id=run.id)
    return run.id, request.id


async def actions(engine: Engine, run_id: str) -> list[str]:
    return [row["action"] for row in await engine.store.ledger(run_id=run_id)]


async def test_nothing_expires_before_expires_at(engine: Engine, clock: ManualClock) -> None:
    run_id, request_id = await parked(engine, "reject-fails")
    request = await engine.store.get_takeover(request_id)
    assert request.expires_at == clock.now() + timedelta(minutes=10)
    clock.set(request.expires_at - timedelta(microseconds=1))
    journal = await engine.store.journal(run_id)
    assert await engine.sweeper.sweep_once() == 0
    assert (await engine.store.get_takeover(request_id)).status == TakeoverStatus.PENDING
    assert await engine.store.journal(run_id) == journal


async def test_auto_reject_fails_the_run(engine: Engine, clock: ManualClock) -> None:
    run_id, request_id = await parked(engine, "reject-fails")
    clock.advance(minutes=10)
    assert await engine.sweeper.sweep_once() == 1
    assert await wait_status(engine, run_id, RunStatus.FAILED) == RunStatus.FAILED
    run = await engine.store.get_run(run_id)
    assert run.error == "expired"
    request = await engine.store.get_takeover(request_id)
    assert request.status == TakeoverStatus.EXPIRED
    events = [e.event for e in await engine.store.journal(run_id)]
    assert events.count(JournalEvent.TAKEOVER_EXPIRED) == 1
    assert events[-2:] == [JournalEvent.STEP_FAILED, JournalEvent.RUN_FAILED]
    assert await actions(engine, run_id) == []
    assert await engine.sweeper.sweep_once() == 0  # expired once, never again


async def test_auto_reject_follows_on_deny(engine: Engine, clock: ManualClock) -> None:
    run_id, _ = await parked(engine, "reject-follows-on-deny")
    clock.advance(minutes=11)
    assert await engine.sweeper.sweep_once() == 1
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await actions(engine, run_id) == ["note"]


async def test_auto_approve_resumes_the_run(engine: Engine, clock: ManualClock) -> None:
    run_id, _ = await parked(engine, "auto-approve")
    clock.advance(minutes=10)
    assert await engine.sweeper.sweep_once() == 1
    assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
    assert await actions(engine, run_id) == ["refund"]
    approved = next(
        e
        for e in await engine.store.journal(run_id)
        if e.event == JournalEvent.STEP_COMPLETED and e.step_id == "approve"
    )
    assert approved.data["output"]["approved"] is True
    assert approved.data["output"]["by"] == "timeout (auto-approve)"


async def test_expired_request_refuses_a_late_grant_before_the_sweep(
    engine: Engine, clock: ManualClock
) -> None:
    run_id, request_id = await parked(engine, "reject-fails")
    clock.advance(minutes=10)
    with pytest.raises(AlreadyDecided) as caught:
        await engine.approvals.grant(request_id, person("bob"), release=True)
    assert caught.value.current == "expired"
    assert (await engine.store.get_run(run_id)).status == RunStatus.WAITING
    assert await engine.sweeper.sweep_once() == 1
    assert await wait_status(engine, run_id, RunStatus.FAILED) == RunStatus.FAILED


async def test_batches_taken_side_by_side_expire_each_request_once(
    engine: Engine, clock: ManualClock
) -> None:
    parked_runs = [await parked(engine, "reject-fails", f"o-{i}") for i in range(23)]
    clock.advance(minutes=10)
    sweeper = Sweeper(engine.store, clock, outbox=notify.card_changed, batch=4, drains=3)
    assert await sweeper.sweep_once() == len(parked_runs)
    for run_id, request_id in parked_runs:
        assert (await engine.store.get_takeover(request_id)).status == TakeoverStatus.EXPIRED
        events = [e.event for e in await engine.store.journal(run_id)]
        assert events.count(JournalEvent.TAKEOVER_EXPIRED) == 1, run_id
    assert await sweeper.sweep_once() == 0


# -- a grant racing the sweeper, over HTTP ----------------------------------------------------


@pytest.fixture
async def api(migrated_db_url: str, clock: ManualClock) -> AsyncIterator[Api]:
    async with running_api(
        migrated_db_url, FLOWS, clock=clock, sweep_interval_seconds=NO_BACKGROUND_SWEEP
    ) as api:
        yield api


async def race_once(api: Api, clock: ManualClock, order: str, when: str) -> str:
    """Grant (with release) and sweep at once; returns who won."""
    engine = api.engine
    run_id, request_id = await parked(engine, "reject-fails", order)
    expires_at = (await engine.store.get_takeover(request_id)).expires_at
    sweeper = engine.sweeper
    if when == "at expiry":
        clock.set(expires_at)
    elif when == "just before":
        clock.set(expires_at - timedelta(milliseconds=1))
    else:  # "skewed": two replicas whose clocks disagree by a millisecond; both are eligible
        clock.set(expires_at - timedelta(milliseconds=1))
        sweeper = Sweeper(
            engine.store,
            ManualClock(expires_at),
            on_requeue=engine.wake,
            outbox=notify.card_changed,
        )
    (status, body), expired = await asyncio.gather(
        api.call(
            "POST",
            f"/v1/runs/{run_id}/takeover/{request_id}/grant",
            as_="bob",
            json={"release": True},
        ),
        sweeper.sweep_once(),
    )
    assert (status == 200) != (expired == 1), (when, status, body, expired)
    request = await engine.store.get_takeover(request_id)
    events = [e.event for e in await engine.store.journal(run_id)]
    if status == 200:
        assert body["status"] == "released"
        assert expired == 0
        assert request.status == TakeoverStatus.RELEASED
        assert JournalEvent.TAKEOVER_EXPIRED not in events
        assert await wait_status(engine, run_id, RunStatus.COMPLETED) == RunStatus.COMPLETED
        assert await actions(engine, run_id) == ["refund"]
        return "grant"
    assert status == 409, body
    assert body["error"] == "already_decided" and body["status"] == "expired"
    assert request.status == TakeoverStatus.EXPIRED
    assert events.count(JournalEvent.TAKEOVER_EXPIRED) == 1
    assert JournalEvent.TAKEOVER_GRANTED not in events
    assert await wait_status(engine, run_id, RunStatus.FAILED) == RunStatus.FAILED
    assert await actions(engine, run_id) == []
    return "sweeper"


@pytest.mark.parametrize(
    ("when", "winners"),
    [
        ("at expiry", {"sweeper"}),  # expiresAt is the first instant a grant is refused
        ("just before", {"grant"}),
        ("skewed", {"grant", "sweeper"}),
    ],
)
async def test_grant_racing_the_sweeper_has_one_outcome(
    api: Api, clock: ManualClock, when: str, winners: set[str]
) -> None:
    seen = [await race_once(api, clock, f"o-{i}", when) for i in range(20)]
    assert set(seen) <= winners, seen


async def test_a_failed_batch_is_raised_once_every_batch_beside_it_has_ended(
    engine: Engine, clock: ManualClock
) -> None:
    for i in range(6):
        await parked(engine, "reject-fails", f"o-{i}")
    clock.advance(minutes=10)
    expire_due = engine.store.expire_due
    calls, in_flight = 0, 0
    failed = asyncio.Event()

    async def one_fails(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls, in_flight
        calls += 1
        if calls == 1:
            await asyncio.sleep(0)  # the other drain starts its batch meanwhile
            failed.set()
            raise StoreError("database error: connection was closed")
        in_flight += 1
        try:
            await failed.wait()  # still in flight when the first batch fails
            return await expire_due(*args, **kwargs)
        finally:
            in_flight -= 1

    engine.store.expire_due = one_fails  # type: ignore[method-assign]
    sweeper = Sweeper(engine.store, clock, outbox=notify.card_changed, batch=2, drains=2)
    with pytest.raises(StoreError):
        await sweeper.sweep_once()
    assert in_flight == 0
    engine.store.expire_due = expire_due  # type: ignore[method-assign]
    assert await sweeper.sweep_once() == 0  # the other drain expired all six
