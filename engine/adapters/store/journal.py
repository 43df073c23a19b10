"""A run's journal: reading it, and the fenced append.

Every change of a run goes through ``append_journal``: one UPDATE of the run row that passes
its ``Guard`` (a lease owner, the statuses the domain's tables allow) and takes the sequence
numbers, then the events. A guard that matches no row is a typed refusal, never a silent
no-op.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from itertools import chain
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Integer,
    String,
    bindparam,
    case,
    column,
    exists,
    func,
    insert,
    literal,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.fast import Fast
from engine.adapters.store.rows import EVENTS, run_from_row
from engine.adapters.store.statuses import may_become, status_in
from engine.adapters.store.tables import UTCDateTime
from engine.domain.errors import AlreadyAppended, NotFound, TransitionRefused
from engine.domain.model import (
    LIVE_RUN_STATUSES,
    RUN_ALLOWED,
    JournalEntry,
    JournalEvent,
    NewEvent,
    Run,
    RunStatus,
    leading_to,
)
from engine.domain.records import Plan


class Guard(StrEnum):
    """What must hold of a run row for an append to go ahead (the fence)."""

    EXISTS = "exists"  # any status (feedback on a finished run)
    LEASE = "lease"  # running, and leased by ``owner``
    LIVE = "live"  # not finished
    PARKED = "parked"  # waiting
    OPEN = "open"  # not parked yet, but may still park (a takeover can still park it)
    FAILABLE = "failable"  # may fail from outside a worker
    CANCELLABLE = "cancellable"  # may be cancelled


REQUEUE = case(
    (t.runs.c.status == RunStatus.WAITING.value, RunStatus.QUEUED.value),
    else_=t.runs.c.status,
)
"""A status value for ``values``: a parked run goes back to the queue, any other keeps its
status (a decision on a manual takeover request of a run that has not parked yet)."""


_GUARDS: dict[Guard, list[ColumnElement[bool]]] = {
    Guard.EXISTS: [],
    Guard.LEASE: [
        t.runs.c.lease_owner == bindparam("owner"),
        status_in(t.runs.c.status, [RunStatus.RUNNING]),
    ],
    Guard.LIVE: [status_in(t.runs.c.status, LIVE_RUN_STATUSES)],
    Guard.PARKED: [status_in(t.runs.c.status, [RunStatus.WAITING])],
    Guard.OPEN: [status_in(t.runs.c.status, leading_to(RunStatus.WAITING, RUN_ALLOWED))],
    Guard.FAILABLE: [may_become(t.runs.c.status, RunStatus.FAILED)],
    Guard.CANCELLABLE: [may_become(t.runs.c.status, RunStatus.CANCELLED)],
}
_APPENDS: dict[tuple[Guard, tuple[tuple[str, bool], ...]], Fast] = {}
FAST_INSERT_JOURNAL = Fast(insert(t.journal))
_RUN_STATUS = Fast(select(t.runs.c.status).where(t.runs.c.id == bindparam("run_id")))


def _append_statement(guard: Guard, shape: tuple[tuple[str, bool], ...]) -> Fast:
    """The run-row UPDATE of an append, built once per guard and value shape: building SQL
    expressions costs several times what executing a prepared one does."""
    stmt = _APPENDS.get((guard, shape))
    if stmt is None:
        values: dict[str, Any] = {
            "next_seq": t.runs.c.next_seq + bindparam("n", type_=Integer()),
            "updated_at": bindparam("now", type_=UTCDateTime()),
        }
        for key, requeue in shape:
            values[key] = REQUEUE if requeue else bindparam(f"v_{key}", type_=t.runs.c[key].type)
        stmt = _APPENDS[(guard, shape)] = Fast(
            update(t.runs)
            .where(t.runs.c.id == bindparam("run_id"), *_GUARDS[guard])
            .values(values)
            .returning(t.runs.c.next_seq)
        )
    return stmt


_APPENDS_WITH_EVENTS: dict[tuple[Guard, tuple[tuple[str, bool], ...]], Any] = {}


def _append_with_events_statement(guard: Guard, shape: tuple[tuple[str, bool], ...]) -> Any:
    """PostgreSQL: an append's run-row UPDATE and its journal INSERT as one statement (the
    UPDATE a data-modifying CTE, the events one JSON array parameter), one round trip instead
    of two. Returns the sequence numbers inserted: none when the guard matched no row."""
    stmt = _APPENDS_WITH_EVENTS.get((guard, shape))
    if stmt is None:
        appended = _append_statement(guard, shape).stmt.cte("appended")
        event = (
            func.json_array_elements(bindparam("events", type_=JSON))
            .table_valued(column("value", postgresql.JSON), with_ordinality="i")
            .render_derived(name="event")
        )
        rows = (
            select(
                bindparam("run_id", type_=String()),
                appended.c.next_seq - bindparam("n", type_=Integer()) + event.c.i - 1,
                event.c.value["s"].astext,
                event.c.value["e"].astext,
                event.c.value["d"],
                bindparam("now", type_=UTCDateTime()),
            )
            .select_from(appended)
            .join(event, true())
        )
        columns = ["run_id", "seq", "step_id", "event", "data", "at"]
        stmt = _APPENDS_WITH_EVENTS[(guard, shape)] = (
            insert(t.journal).from_select(columns, rows).returning(t.journal.c.seq)
        )
    return stmt


_RUN = Fast(select(t.runs).where(t.runs.c.id == bindparam("run_id")))
_J = t.journal.c
# In ``JournalEntry``'s field order: ``read_journal`` builds the entries from the rows as they
# come, without a mapping per row.
_JOURNAL = Fast(
    select(_J.run_id, _J.seq, _J.event, _J.step_id, _J.data, _J.at)
    .where(_J.run_id == bindparam("run_id"))
    .order_by(_J.seq)
)


def read_run_and_journal(conn: Connection, run_id: str) -> tuple[Run, list[JournalEntry]]:
    """A run and its whole journal (what a worker replays)."""
    row = _RUN(conn, {"run_id": run_id}).mappings().first()
    if row is None:
        raise NotFound(f"run {run_id} not found", run_id=run_id)
    return run_from_row(row), read_journal(conn, run_id)


def read_journal(conn: Connection, run_id: str) -> list[JournalEntry]:
    """A run's whole journal, in order."""
    events = EVENTS
    return [
        JournalEntry(run, seq, events[event], step_id, data, at)
        for run, seq, event, step_id, data, at in _JOURNAL(conn, {"run_id": run_id})
    ]


def read_for_worker(
    conn: Connection, run_id: str, owner: str, now: datetime, plan: Plan | None
) -> tuple[Run, list[JournalEntry]]:
    """A run just claimed for ``owner``'s worker, and its journal, read in the claiming
    transaction; with ``plan``, the events the worker's replay would commit first (see
    ``Adopt.plan``) are appended there too, under the new lease."""
    run, journal = read_run_and_journal(conn, run_id)
    planned = plan(run, journal) if plan is not None else []
    if planned:
        first = append_journal(conn, run_id, planned, now, guard=Guard.LEASE, owner=owner)
        journal += entries(run_id, first, planned, now)
    return run, journal


def entries(
    run_id: str, first: int, events: Sequence[NewEvent], now: datetime
) -> list[JournalEntry]:
    """``events`` as the journal holds them once appended from sequence number ``first``."""
    return [
        JournalEntry(run_id, first + i, e.event, e.step_id, e.data, now)
        for i, e in enumerate(events)
    ]


def append_journal(
    conn: Connection,
    run_id: str,
    events: Sequence[NewEvent],
    now: datetime,
    *,
    guard: Guard = Guard.EXISTS,
    owner: str | None = None,
    values: Mapping[str, Any] | None = None,
    refused: str = "run is not in a state that allows this",
    expect: int | None = None,
) -> int:
    """Append ``events`` to a run's journal if the run row passes ``guard`` (the fence: a
    lease owner, an expected status), setting ``values`` on it (``REQUEUE`` for the status of
    a decision). Returns the sequence number of the first event appended. Raises
    ``TransitionRefused`` when the guard matches no row, ``NotFound`` without a run.

    ``expect``: the sequence number the caller expects its events to get. When they would get
    another and the journal already holds these very events from ``expect`` on, an earlier
    attempt of this append committed though its caller was told it failed (the connection
    died during COMMIT): ``AlreadyAppended`` is raised instead of appending them twice."""
    count = len(events)
    items = sorted((values or {}).items())
    shape = tuple((key, value is REQUEUE) for key, value in items)
    params: dict[str, Any] = {"run_id": run_id, "n": count, "now": now, "owner": owner}
    params.update({f"v_{key}": value for key, value in items if value is not REQUEUE})
    # PostgreSQL inserts the events in the UPDATE's own statement; SQLite after it.
    one_statement = bool(events) and conn.dialect.name != "sqlite"
    if one_statement:
        params["events"] = [{"s": e.step_id, "e": e.event.value, "d": e.data} for e in events]
        seqs = conn.execute(_append_with_events_statement(guard, shape), params).scalars().all()
        next_seq = max(seqs) + 1 if seqs else None
    else:
        next_seq = _append_statement(guard, shape)(conn, params).scalar_one_or_none()
    if next_seq is None:
        current = _RUN_STATUS(conn, {"run_id": run_id}).scalar_one_or_none()
        if current is None:
            raise NotFound(f"run {run_id} not found", run_id=run_id)
        raise TransitionRefused(refused, current=current, run_id=run_id)
    first = next_seq - count
    if expect is not None and first != expect and _landed(conn, run_id, expect, events):
        # Rolls this attempt back (on PostgreSQL its events were inserted with the UPDATE):
        # the events are there once.
        raise AlreadyAppended(expect)
    if events and not one_statement:
        FAST_INSERT_JOURNAL(
            conn,
            [
                {
                    "run_id": run_id,
                    "seq": first + i,
                    "step_id": ev.step_id,
                    "event": ev.event.value,
                    "data": ev.data,
                    "at": now,
                }
                for i, ev in enumerate(events)
            ],
        )
    return int(first)


# -- the batch form: one event for each of many runs, which go back to the queue ------------------
# What a sweep batch journals (``takeover_expired`` for each request): every live run among them
# is re-queued with a sequence number and gets its event; a run that has ended gets nothing.
# Set-based, whatever the batch's size: no statement per run.


def json_keys() -> Any:
    """SQLite: keys bound as one JSON array (``json_each``), so the statement is constant
    (``engine.adapters.store.fast``: compiled once, run on the driver) whatever their number."""
    return select(literal_column("value")).select_from(
        func.json_each(bindparam("ids", type_=JSON()))
    )


_REQUEUE_MANY = Fast(
    update(t.runs)
    # The live statuses as one literal each: a list bound to IN is expanded per execution,
    # which the constant statement cannot be.
    .where(t.runs.c.id.in_(json_keys()), *_GUARDS[Guard.LIVE])
    .values(
        next_seq=t.runs.c.next_seq + 1,
        updated_at=bindparam("now", type_=UTCDateTime()),
        status=REQUEUE,
    )
    .returning(t.runs.c.id, t.runs.c.next_seq)
)


def requeue_with_events(
    conn: Connection, appends: Sequence[tuple[str, NewEvent]], now: datetime
) -> int:
    """SQLite: ``append_journal`` for many runs at once, one event each (``(run_id, event)``,
    one per run), under ``Guard.LIVE`` with the run re-queued: two statements for the batch.
    Returns the number of events appended (runs that have ended get none)."""
    if not appends:
        return 0
    seqs: dict[str, int] = dict(
        _REQUEUE_MANY(conn, {"ids": [run_id for run_id, _ in appends], "now": now}).rows
    )
    rows = [
        {
            "run_id": run_id,
            "seq": seqs[run_id] - 1,
            "step_id": ev.step_id,
            "event": ev.event.value,
            "data": ev.data,
            "at": now,
        }
        for run_id, ev in appends
        if run_id in seqs
    ]
    if rows:
        FAST_INSERT_JOURNAL(conn, rows)
    return len(rows)


def requeue_with_events_cte(
    source: Any,
    event: JournalEvent,
    data: Mapping[str, Any],
    *,
    run_ids: Any,
    now: Any,
) -> Any:
    """PostgreSQL: the batch form of ``append_journal`` as CTEs of one statement. ``source``
    is a CTE of rows with ``run_id`` and ``step_id`` (a data-modifying one: the batch's own
    write); each live run among ``run_ids`` (an array parameter: the candidates) that has a
    row there is re-queued with a sequence number and journals ``event`` with ``data`` (its
    values SQL expressions over ``source``). Returns the journal INSERT, to add as a CTE."""
    requeued = (
        update(t.runs)
        .where(
            # By key, not joined: joined, PostgreSQL hashes the whole runs table for each batch.
            # The keys as a set (unnest), not ``= ANY(array)``: PostgreSQL probes the primary
            # key once per key (EXPLAIN: a nested loop over pk_runs, 14 ms for 2,000 keys),
            # where with ANY it filtered every row of the table against the array (a sequential
            # scan of 100,000 runs, 30 ms).
            t.runs.c.id.in_(select(func.unnest(run_ids))),
            *_GUARDS[Guard.LIVE],
            exists().where(source.c.run_id == t.runs.c.id),
        )
        .values(next_seq=t.runs.c.next_seq + 1, updated_at=now, status=REQUEUE)
        .returning(t.runs.c.id, t.runs.c.next_seq)
        .cte("requeued")
    )
    return insert(t.journal).from_select(
        ["run_id", "seq", "step_id", "event", "data", "at"],
        select(
            requeued.c.id,
            requeued.c.next_seq - 1,
            source.c.step_id,
            literal(event.value),
            func.json_build_object(*chain.from_iterable(data.items())),
            now,
        ).join_from(source, requeued, requeued.c.id == source.c.run_id),
    )


_JOURNAL_SLICE = Fast(
    select(t.journal.c.event, t.journal.c.step_id, t.journal.c.data)
    .where(
        t.journal.c.run_id == bindparam("run_id"),
        t.journal.c.seq >= bindparam("first"),
        t.journal.c.seq < bindparam("end"),
    )
    .order_by(t.journal.c.seq)
)


def _landed(conn: Connection, run_id: str, first: int, events: Sequence[NewEvent]) -> bool:
    """Whether the journal holds ``events`` from ``first`` on (data compared as stored)."""
    params = {"run_id": run_id, "first": first, "end": first + len(events)}
    found = [
        (row["event"], row["step_id"], row["data"])
        for row in _JOURNAL_SLICE(conn, params).mappings()
    ]
    return found == [(e.event.value, e.step_id, json.loads(json.dumps(e.data))) for e in events]
