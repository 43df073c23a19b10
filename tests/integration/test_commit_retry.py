"""A worker's commit while the database is unreachable: it is tried again for up to a lease
rather than given up (the step already called would be called again once the lease runs out),
and an attempt whose commit happened unseen is not applied twice."""

from __future__ import annotations

from typing import Any

from engine.domain.errors import StoreError
from engine.domain.model import JournalEvent, NewEvent, RunStatus
from engine.domain.records import Adopt, NewRun
from tests.support.engines import AGENT, make_engine, wait_status

FLOW = """
flow:
  nodes:
    - {id: pay, type: connector, connector: demo-ledger, action: refund,
       args: {order: o-1, amount: 5}}
"""


async def test_a_result_commit_that_fails_for_a_while_is_kept_not_the_step_run_again(
    migrated_db_url: str,
) -> None:
    engine = make_engine(migrated_db_url, FLOW)
    append = engine.store.append_events
    refused: list[str] = []

    async def unreachable_for_a_while(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("finish") is not None and len(refused) < 3:
            refused.append("finish")  # what transact raises once its own attempts are spent
            raise StoreError("database error: connection was closed in the middle of operation")
        return await append(*args, **kwargs)

    engine.store.append_events = unreachable_for_a_while  # type: ignore[method-assign]
    await engine.start()
    try:
        run, _ = await engine.runs.start_run("flow", {}, AGENT)
        assert await wait_status(engine, run.id, RunStatus.COMPLETED) == RunStatus.COMPLETED
        ledger = await engine.store.ledger(run_id=run.id)
        journal = await engine.store.journal(run.id)
    finally:
        await engine.stop()
    assert refused == ["finish"] * 3
    assert [entry["step_id"] for entry in ledger] == ["pay"]  # called once
    assert [e.event for e in journal].count(JournalEvent.STEP_COMPLETED) == 1


async def test_an_append_that_committed_unseen_is_not_appended_again(
    migrated_db_url: str,
) -> None:
    engine = make_engine(migrated_db_url, FLOW)
    now = engine.clock.now()
    try:
        await engine.store.create_run(
            NewRun(id="r-1", workflow="flow", input={}, adopt=Adopt("me", now)), now
        )
        events = [
            NewEvent(JournalEvent.STEP_STARTED, "pay", {"nodeType": "connector"}),
            NewEvent(JournalEvent.STEP_COMPLETED, "pay", {"output": {"n": (1, 2)}}),
        ]
        first = await engine.store.append_events("r-1", "me", events, now, expect=2)
        # The same append tried again (its caller saw the connection die during COMMIT).
        again = await engine.store.append_events("r-1", "me", events, now, expect=2)
        other = [NewEvent(JournalEvent.STEP_STARTED, "x", {"nodeType": "connector"})]
        # Someone else's events where this append expected its own: appended after them.
        late = await engine.store.append_events("r-1", "me", other, now, expect=2)
        journal = await engine.store.journal("r-1")
    finally:
        await engine.stop()
    assert (first, again, late) == (2, 2, 4)
    assert [(e.seq, e.event, e.step_id) for e in journal] == [
        (1, JournalEvent.RUN_STARTED, None),
        (2, JournalEvent.STEP_STARTED, "pay"),
        (3, JournalEvent.STEP_COMPLETED, "pay"),
        (4, JournalEvent.STEP_STARTED, "x"),
    ]


async def test_a_step_whose_write_to_our_database_fails_is_tried_again_not_failed(
    migrated_db_url: str,
) -> None:
    """The demo ledger writes to the engine's own database: its outage is not the step's
    failure. The worker advances the run again and the step is called with the same key."""
    engine = make_engine(migrated_db_url, FLOW)
    record = engine.store.record_ledger
    keys: list[str] = []

    async def unreachable_twice(
        connector: str, action: str, args: Any, key: str, *a: Any, **kw: Any
    ) -> Any:
        keys.append(key)
        if len(keys) <= 2:
            raise StoreError("database error: connection was closed in the middle of operation")
        return await record(connector, action, args, key, *a, **kw)

    engine.store.record_ledger = unreachable_twice  # type: ignore[method-assign]
    await engine.start()
    try:
        run, _ = await engine.runs.start_run("flow", {}, AGENT)
        assert await wait_status(engine, run.id, RunStatus.COMPLETED, RunStatus.FAILED) == (
            RunStatus.COMPLETED
        )
        journal = await engine.store.journal(run.id)
    finally:
        await engine.stop()
    assert keys == [f"{run.id}:pay:1"] * 3  # one attempt, called again with its key
    assert JournalEvent.STEP_FAILED not in [e.event for e in journal]
