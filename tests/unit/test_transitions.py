"""Lifecycles are data: the ALLOWED tables say exactly what DESIGN.md says, and the store never
applies a transition the tables forbid. Every store operation is tried from every status: an
allowed one changes the row (and journals it), a refused one raises a typed error (or reports
that it did nothing) and leaves the run, the request and the journal exactly as they were."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest

from engine.adapters.store import SqlStore
from engine.domain import decisions
from engine.domain.errors import AlreadyDecided, TransitionRefused
from engine.domain.model import (
    RUN_ALLOWED,
    TAKEOVER_ALLOWED,
    TERMINAL_RUN_STATUSES,
    TERMINAL_TAKEOVER_STATUSES,
    JournalEvent,
    NewEvent,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    sources_of,
)
from engine.domain.records import NewRun

R = RunStatus
T = TakeoverStatus

# DESIGN.md, "Vocabulary and states", written out pair by pair (plus running -> queued: a worker
# gives a run back on shutdown). The tables in engine/domain/model.py must say exactly this.
DESIGNED_RUN = {
    (R.QUEUED, R.RUNNING),
    (R.RUNNING, R.WAITING),
    (R.RUNNING, R.COMPLETED),
    (R.RUNNING, R.FAILED),
    (R.RUNNING, R.CANCELLED),
    (R.RUNNING, R.QUEUED),
    (R.WAITING, R.QUEUED),
    (R.WAITING, R.FAILED),
    (R.QUEUED, R.CANCELLED),
    (R.WAITING, R.CANCELLED),
}
DESIGNED_TAKEOVER = {
    (T.PENDING, T.GRANTED),
    (T.GRANTED, T.RELEASED),
    (T.PENDING, T.DENIED),
    (T.PENDING, T.EXPIRED),
    (T.PENDING, T.CANCELLED),
    (T.GRANTED, T.CANCELLED),
}


@pytest.mark.parametrize(
    ("src", "dst"), list(itertools.product(RunStatus, RunStatus)), ids=lambda s: s.value
)
def test_run_table(src: RunStatus, dst: RunStatus) -> None:
    assert (dst in RUN_ALLOWED[src]) == ((src, dst) in DESIGNED_RUN)


@pytest.mark.parametrize(
    ("src", "dst"),
    list(itertools.product(TakeoverStatus, TakeoverStatus)),
    ids=lambda s: s.value,
)
def test_takeover_table(src: TakeoverStatus, dst: TakeoverStatus) -> None:
    assert (dst in TAKEOVER_ALLOWED[src]) == ((src, dst) in DESIGNED_TAKEOVER)


def test_terminal_statuses() -> None:
    assert TERMINAL_RUN_STATUSES == {R.COMPLETED, R.FAILED, R.CANCELLED}
    assert TERMINAL_TAKEOVER_STATUSES == {T.RELEASED, T.DENIED, T.EXPIRED, T.CANCELLED}
    assert set(RUN_ALLOWED) == set(RunStatus)
    assert set(TAKEOVER_ALLOWED) == set(TakeoverStatus)


# -- the store, from every status -----------------------------------------------------------------

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
BEFORE_EXPIRY = T0 + timedelta(minutes=1)
AFTER_EXPIRY = T0 + timedelta(minutes=31)
OWNER = "worker-1"
LEASE = timedelta(seconds=30)


@dataclass(frozen=True)
class Snapshot:
    run: Any
    request: Any
    journal: list[Any]


async def snapshot(store: SqlStore, run_id: str, request_id: str | None = None) -> Snapshot:
    request = await store.get_takeover(request_id) if request_id else None
    return Snapshot(await store.get_run(run_id), request, await store.journal(run_id))


def new_events(before: Snapshot, after: Snapshot) -> list[JournalEvent]:
    assert after.journal[: len(before.journal)] == before.journal  # append-only
    return [e.event for e in after.journal[len(before.journal) :]]


# -- takeover requests ----------------------------------------------------------------------------


async def parked_request(store: SqlStore, status: TakeoverStatus) -> tuple[str, str]:
    """A waiting run with one takeover request in ``status``, written directly by the store."""
    run_id, request_id = f"run-{status.value}", f"tk-{status.value}"
    decided = status not in (T.PENDING,)
    request = TakeoverRequest(
        id=request_id,
        run_id=run_id,
        step_id="approve",
        kind=TakeoverKind.NODE,
        status=status,
        reason="Pay 10",
        created_at=T0,
        expires_at=T0 + timedelta(minutes=30),
        decided_by="carol" if decided else None,
        decided_at=T0 if decided else None,
    )
    await store.create_run(
        NewRun(id=run_id, workflow="pay", input={"amount": 10}, status=R.WAITING),
        T0,
        [
            NewEvent(JournalEvent.STEP_STARTED, "approve", {"nodeType": "approval"}),
            NewEvent(JournalEvent.TAKEOVER_REQUESTED, "approve", {"requestId": request_id}),
            NewEvent(JournalEvent.RUN_WAITING, "approve", {"requestId": request_id}),
        ],
        takeover=request,
    )
    return run_id, request_id


TakeoverOp = Callable[[SqlStore, str, str], Awaitable[Any]]


@dataclass(frozen=True)
class TkCase:
    """A store operation on a takeover request: the statuses it walks through (each step must be
    in TAKEOVER_ALLOWED), the journal events and run status it leaves when it is allowed."""

    op: TakeoverOp
    path: tuple[TakeoverStatus, ...]
    events: tuple[JournalEvent, ...]
    run_after: RunStatus
    refused: type[Exception] | None  # None: a refusal is reported, not raised

    def allowed_from(self, status: TakeoverStatus) -> bool:
        current = status
        for step in self.path:
            if step not in TAKEOVER_ALLOWED[current]:
                return False
            current = step
        return True


async def _grant(store: SqlStore, _run: str, request_id: str) -> Any:
    return await store.apply_decision(
        request_id, partial(decisions.grant, person="bob", now=BEFORE_EXPIRY), BEFORE_EXPIRY
    )


async def _grant_release(store: SqlStore, _run: str, request_id: str) -> Any:
    grant = partial(decisions.grant, person="bob", now=BEFORE_EXPIRY, release=True)
    return await store.apply_decision(request_id, grant, BEFORE_EXPIRY)


async def _deny(store: SqlStore, _run: str, request_id: str) -> Any:
    deny = partial(decisions.deny, person="bob", now=BEFORE_EXPIRY, notes="no")
    return await store.apply_decision(request_id, deny, BEFORE_EXPIRY)


async def _release(store: SqlStore, _run: str, request_id: str) -> Any:
    release = partial(decisions.release, person="bob", now=BEFORE_EXPIRY)
    return await store.apply_decision(request_id, release, BEFORE_EXPIRY)


async def _expire(store: SqlStore, _run: str, _request: str) -> Any:
    return await store.expire_due(AFTER_EXPIRY)


async def _cancel(store: SqlStore, run_id: str, _request: str) -> Any:
    return await store.cancel_run(run_id, "alice", BEFORE_EXPIRY)


E = JournalEvent
TK_CASES = {
    "grant": TkCase(_grant, (T.GRANTED,), (E.TAKEOVER_GRANTED,), R.WAITING, AlreadyDecided),
    "grant+release": TkCase(
        _grant_release,
        (T.GRANTED, T.RELEASED),
        (E.TAKEOVER_GRANTED, E.TAKEOVER_RELEASED, E.RUN_RESUMED),
        R.QUEUED,
        AlreadyDecided,
    ),
    "deny": TkCase(_deny, (T.DENIED,), (E.TAKEOVER_DENIED,), R.QUEUED, AlreadyDecided),
    "release": TkCase(
        _release,
        (T.RELEASED,),
        (E.TAKEOVER_RELEASED, E.RUN_RESUMED),
        R.QUEUED,
        TransitionRefused,
    ),
    "expire": TkCase(_expire, (T.EXPIRED,), (E.TAKEOVER_EXPIRED,), R.QUEUED, None),
    "cancel": TkCase(
        _cancel, (T.CANCELLED,), (E.TAKEOVER_CANCELLED, E.RUN_CANCELLED), R.CANCELLED, None
    ),
}


@pytest.mark.parametrize("name", list(TK_CASES))
async def test_takeover_operation_from_every_status(store: SqlStore, name: str) -> None:
    case = TK_CASES[name]
    allowed_from = {s for s in TakeoverStatus if case.allowed_from(s)}
    assert allowed_from, f"{name} is allowed from no status at all"
    for status in TakeoverStatus:
        run_id, request_id = await parked_request(store, status)
        before = await snapshot(store, run_id, request_id)
        if status in allowed_from:
            result = await case.op(store, run_id, request_id)
            after = await snapshot(store, run_id, request_id)
            assert after.request.status == case.path[-1], (name, status)
            assert new_events(before, after) == list(case.events), (name, status)
            assert after.run.status == case.run_after, (name, status)
            if name == "expire":
                assert [r.id for r in result] == [request_id]
            continue
        if case.refused is not None:
            with pytest.raises(case.refused) as caught:
                await case.op(store, run_id, request_id)
            assert isinstance(caught.value, TransitionRefused)
            assert caught.value.current == status.value, (name, status)
            assert await snapshot(store, run_id, request_id) == before, (name, status)
        elif name == "expire":
            assert await case.op(store, run_id, request_id) == [], status
            assert await snapshot(store, run_id, request_id) == before, status
        else:  # cancelling the run leaves a request that was already decided as it was
            assert await case.op(store, run_id, request_id) == [], status
            after = await snapshot(store, run_id, request_id)
            assert after.request == before.request, status
            assert new_events(before, after) == [E.RUN_CANCELLED], status
            assert after.run.status == R.CANCELLED


async def test_grant_after_expiry_instant_is_refused_even_before_the_sweep(
    store: SqlStore,
) -> None:
    run_id, request_id = await parked_request(store, T.PENDING)
    before = await snapshot(store, run_id, request_id)
    expiry = before.request.expires_at
    for op in (decisions.grant, decisions.deny):
        with pytest.raises(AlreadyDecided) as caught:
            await store.apply_decision(request_id, partial(op, person="bob", now=expiry), expiry)
        assert caught.value.current == "expired"
    assert await snapshot(store, run_id, request_id) == before


async def test_cancelling_an_ended_run_is_refused(store: SqlStore) -> None:
    run_id, request_id = await parked_request(store, T.PENDING)
    await store.cancel_run(run_id, "alice", BEFORE_EXPIRY)
    before = await snapshot(store, run_id, request_id)
    assert before.run.status == R.CANCELLED
    assert before.request.status == T.CANCELLED
    with pytest.raises(TransitionRefused) as caught:
        await store.cancel_run(run_id, "alice", BEFORE_EXPIRY)
    assert caught.value.current == "cancelled"
    assert await snapshot(store, run_id, request_id) == before


# -- runs -----------------------------------------------------------------------------------------


async def run_in(store: SqlStore, status: RunStatus) -> str:
    """A run brought to ``status`` through the store's own operations."""
    run_id = f"run-{status.value}"
    await store.create_run(NewRun(id=run_id, workflow="pay", input={}), T0)
    if status == R.QUEUED:
        return run_id
    if status == R.CANCELLED:
        await store.cancel_run(run_id, "alice", T0)
        return run_id
    assert await store.claim_runs(OWNER, T0, LEASE, 1) == [run_id]
    if status == R.WAITING:
        await store.park_run(run_id, OWNER, [NewEvent(E.RUN_WAITING, "approve")], T0)
    elif status == R.COMPLETED:
        await store.append_events(
            run_id, OWNER, [NewEvent(E.RUN_COMPLETED)], T0, finish=R.COMPLETED
        )
    elif status == R.FAILED:
        await store.append_events(run_id, OWNER, [NewEvent(E.RUN_FAILED)], T0, finish=R.FAILED)
    assert (await store.get_run(run_id)).status == status
    return run_id


RunOp = Callable[[SqlStore, str], Awaitable[Any]]
LATER = T0 + timedelta(seconds=1)  # inside the lease


async def _claim(store: SqlStore, run_id: str) -> Any:
    return await store.claim_runs("worker-2", LATER, LEASE, 10)


async def _park(store: SqlStore, run_id: str) -> Any:
    return await store.park_run(run_id, OWNER, [NewEvent(E.RUN_WAITING, "approve")], LATER)


async def _complete(store: SqlStore, run_id: str) -> Any:
    return await store.append_events(
        run_id, OWNER, [NewEvent(E.RUN_COMPLETED)], LATER, finish=R.COMPLETED
    )


async def _requeue(store: SqlStore, run_id: str) -> Any:
    return await store.requeue_run(run_id, OWNER, LATER)


async def _fail_unowned(store: SqlStore, run_id: str) -> Any:
    return await store.fail_run_unowned(run_id, "workflow deleted", LATER)


async def _cancel_run(store: SqlStore, run_id: str) -> Any:
    return await store.cancel_run(run_id, "alice", LATER)


@dataclass(frozen=True)
class RunCase:
    op: RunOp
    target: RunStatus
    sources: frozenset[RunStatus]  # where the operation applies (a subset of the table's)
    refusal: Any  # the value a refusal returns, or an exception type it raises


RUN_CASES = {
    "claim": RunCase(_claim, R.RUNNING, frozenset({R.QUEUED}), []),
    "park": RunCase(_park, R.WAITING, frozenset({R.RUNNING}), TransitionRefused),
    "complete": RunCase(_complete, R.COMPLETED, frozenset({R.RUNNING}), TransitionRefused),
    # waiting -> queued belongs to the decisions (release, deny, expiry), tested above
    "requeue": RunCase(_requeue, R.QUEUED, frozenset({R.RUNNING}), False),
    "fail_unowned": RunCase(_fail_unowned, R.FAILED, frozenset({R.RUNNING, R.WAITING}), False),
    "cancel": RunCase(
        _cancel_run, R.CANCELLED, frozenset({R.QUEUED, R.RUNNING, R.WAITING}), TransitionRefused
    ),
}


@pytest.mark.parametrize("name", list(RUN_CASES))
async def test_run_operation_from_every_status(store: SqlStore, name: str) -> None:
    case = RUN_CASES[name]
    assert case.sources <= sources_of(case.target, RUN_ALLOWED)
    # Every run is set up first: setting one up claims the only queued run there is.
    runs = {status: await run_in(store, status) for status in (*RunStatus,)[1:]}
    runs[R.QUEUED] = await run_in(store, R.QUEUED)
    for status in RunStatus:
        run_id = runs[status]
        before = await snapshot(store, run_id)
        if status in case.sources:
            await case.op(store, run_id)
            after = await snapshot(store, run_id)
            assert after.run.status == case.target, (name, status)
            if case.target != R.RUNNING:
                assert after.run.lease_owner is None, (name, status)
            continue
        if isinstance(case.refusal, type):
            with pytest.raises(case.refusal) as caught:
                await case.op(store, run_id)
            assert caught.value.current == status.value, (name, status)
        else:
            assert await case.op(store, run_id) == case.refusal, (name, status)
        assert await snapshot(store, run_id) == before, (name, status)


async def test_a_lost_lease_fences_the_old_owner_out(store: SqlStore) -> None:
    run, _ = await store.create_run(NewRun(id="run-1", workflow="pay", input={}), T0)
    run_id = run.id
    assert await store.claim_runs(OWNER, T0, LEASE, 1) == [run_id]
    assert await store.claim_runs("worker-2", T0 + LEASE / 2, LEASE, 1) == []
    taken_at = T0 + LEASE + timedelta(seconds=1)
    assert await store.claim_runs("worker-2", taken_at, LEASE, 1) == [run_id]
    before = await snapshot(store, run_id)
    assert before.run.lease_owner == "worker-2"
    with pytest.raises(TransitionRefused):
        await store.append_events(run_id, OWNER, [NewEvent(E.STEP_STARTED, "x")], taken_at)
    assert not await store.renew_lease(run_id, OWNER, taken_at + LEASE)
    assert not await store.requeue_run(run_id, OWNER, taken_at)
    assert await snapshot(store, run_id) == before
