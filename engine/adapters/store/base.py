"""Shared pieces of the SQL store: row conversion and the fenced journal append."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Integer,
    String,
    any_,
    bindparam,
    case,
    column,
    func,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from engine.adapters.store import tables as t
from engine.adapters.store.db import OUTBOX_READY, Database, mark_ready
from engine.adapters.store.fast import Fast
from engine.adapters.store.tables import UTCDateTime
from engine.domain.errors import AlreadyAppended, NotFound, TransitionRefused
from engine.domain.model import (
    RUN_ALLOWED,
    JournalEntry,
    JournalEvent,
    NewEvent,
    OutboxMessage,
    Run,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
    Vote,
)
from engine.domain.records import Plan

_IGNORING: dict[tuple[str, str, tuple[str, ...]], Any] = {}
_FAST_IGNORING: dict[tuple[str, str, tuple[str, ...]], Fast] = {}


class StoreBase:
    """Holds the database; the mixins of ``SqlStore`` add the operations."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def insert_ignore_on(self, table: Any, *keys: str) -> Any:
        """``INSERT ... ON CONFLICT (keys) DO NOTHING``, built once per table and dialect."""
        cache_key = (self.db.dialect, table.name, keys)
        stmt = _IGNORING.get(cache_key)
        if stmt is None:
            stmt = _IGNORING[cache_key] = self.insert_ignore(table).on_conflict_do_nothing(
                index_elements=list(keys)
            )
        return stmt

    def fast_insert_ignore_on(self, table: Any, *keys: str) -> Fast:
        """``insert_ignore_on`` for the hot path (``engine.adapters.store.fast``)."""
        cache_key = (self.db.dialect, table.name, keys)
        fast = _FAST_IGNORING.get(cache_key)
        if fast is None:
            fast = _FAST_IGNORING[cache_key] = Fast(self.insert_ignore_on(table, *keys))
        return fast

    def one_of(self, column: Any, values: Sequence[str]) -> ColumnElement[bool]:
        """``column IN values``; on PostgreSQL ``= ANY(array)``: one bound parameter, so one
        prepared statement and plan whatever the number of values."""
        if self.db.is_sqlite:
            matches: ColumnElement[bool] = column.in_(list(values))
        else:
            array = bindparam(None, list(values), type_=postgresql.ARRAY(String()))
            matches = column == any_(array)
        return matches

    async def nothing_to_claim(self, probe: Fast, params: Mapping[str, Any]) -> bool:
        """On SQLite, whether a claim would find nothing (``probe``: a SELECT of the claimable
        rows), asked with a read on the caller's thread rather than a write queued for the one
        writer. PostgreSQL claims in one round trip: there the claim is always made."""
        if not self.db.is_sqlite:
            return False

        def work(conn: Connection) -> bool:
            return probe(conn, params).first() is None

        return await self.db.transact(work, write=False)

    def insert_ignore(self, table: Any) -> Any:
        """An INSERT that does nothing when a unique key already exists."""
        dialect_insert = sqlite.insert if self.db.is_sqlite else postgresql.insert
        return dialect_insert(table)


# A replay reads every event of a run: a dict lookup costs a fraction of ``JournalEvent(v)``.
_EVENTS = {e.value: e for e in JournalEvent}
_RUN_STATUSES = {s.value: s for s in RunStatus}


def run_from_row(row: Any) -> Run:
    return Run(
        id=row["id"],
        workflow=row["workflow"],
        status=_RUN_STATUSES[row["status"]],
        input=row["input"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        requested_by=row["requested_by"],
        agent=row["agent"],
        parent_run_id=row["parent_run_id"],
        parent_step_id=row["parent_step_id"],
        idempotency_key=row["idempotency_key"],
        output=row["output"],
        error=row["error"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
    )


def takeover_from_row(row: Any, votes: Sequence[Vote] = ()) -> TakeoverRequest:
    return TakeoverRequest(
        id=row["id"],
        run_id=row["run_id"],
        step_id=row["step_id"],
        kind=TakeoverKind(row["kind"]),
        status=TakeoverStatus(row["status"]),
        reason=row["reason"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        approvers=tuple(row["approvers"]),
        approvals_required=row["approvals_required"],
        allow_self_approval=row["allow_self_approval"],
        timeout_behavior=TimeoutBehavior(row["timeout_behavior"]),
        channels=tuple(row["channels"]),
        requested_by=row["requested_by"],
        details=row["details"],
        votes=tuple(votes),
        decided_by=row["decided_by"],
        decided_at=row["decided_at"],
        notes=row["notes"],
        released_by=row["released_by"],
        released_at=row["released_at"],
        sdp_offer=row["sdp_offer"],
        sdp_answer=row["sdp_answer"],
        deny_reason_required=row["deny_reason_required"],
        remind_at=row["remind_at"],
        escalate_at=row["escalate_at"],
        escalate_to=tuple(row["escalate_to"]),
    )


def takeover_values(req: TakeoverRequest) -> dict[str, Any]:
    return {
        "id": req.id,
        "run_id": req.run_id,
        "step_id": req.step_id,
        "kind": req.kind.value,
        "status": req.status.value,
        "reason": req.reason,
        "approvers": list(req.approvers),
        "approvals_required": req.approvals_required,
        "approvals": 0,
        "allow_self_approval": req.allow_self_approval,
        "timeout_behavior": req.timeout_behavior.value,
        "channels": list(req.channels),
        "requested_by": req.requested_by,
        "details": req.details,
        "binding_hash": req.details.get("bindingHash"),
        "deny_reason_required": req.deny_reason_required,
        "remind_at": req.remind_at,
        "escalate_at": req.escalate_at,
        "escalate_to": list(req.escalate_to),
        "created_at": req.created_at,
        "expires_at": req.expires_at,
    }


def journal_from_row(row: Any) -> JournalEntry:
    return JournalEntry(
        run_id=row["run_id"],
        seq=row["seq"],
        event=_EVENTS[row["event"]],
        step_id=row["step_id"],
        data=row["data"],
        at=row["at"],
    )


class Guard(StrEnum):
    """What must hold of a run row for an append to go ahead (the fence)."""

    EXISTS = "exists"  # any status (feedback on a finished run)
    LEASE = "lease"  # running, and leased by ``owner``
    LIVE = "live"  # not finished
    WAITING = "waiting"  # parked
    OPEN = "open"  # queued or running (a takeover can still park it)
    FAILABLE = "failable"  # running or waiting


REQUEUE = case(
    (t.runs.c.status == RunStatus.WAITING.value, RunStatus.QUEUED.value),
    else_=t.runs.c.status,
)
"""A status value for ``values``: a parked run goes back to the queue, any other keeps its
status (a decision on a manual takeover request of a run that has not parked yet)."""


def _status_in(*statuses: RunStatus) -> ColumnElement[bool]:
    """``status IN (...)`` with one parameter per value, not an expanding one: the guarded
    statements are compiled once (``engine.adapters.store.fast``)."""
    return t.runs.c.status.in_([literal(s.value) for s in statuses])


_GUARDS: dict[Guard, list[ColumnElement[bool]]] = {
    Guard.EXISTS: [],
    Guard.LEASE: [
        t.runs.c.lease_owner == bindparam("owner"),
        t.runs.c.status == RunStatus.RUNNING.value,
    ],
    Guard.LIVE: [_status_in(*(s for s in RunStatus if RUN_ALLOWED[s]))],
    Guard.WAITING: [t.runs.c.status == RunStatus.WAITING.value],
    Guard.OPEN: [_status_in(RunStatus.QUEUED, RunStatus.RUNNING)],
    Guard.FAILABLE: [_status_in(RunStatus.RUNNING, RunStatus.WAITING)],
}
_APPENDS: dict[tuple[Guard, tuple[tuple[str, bool], ...]], Fast] = {}
INSERT_JOURNAL = insert(t.journal)
INSERT_RUN = insert(t.runs)
INSERT_TAKEOVER = insert(t.takeover_requests)
FAST_INSERT_JOURNAL = Fast(INSERT_JOURNAL)
FAST_INSERT_RUN = Fast(INSERT_RUN)
FAST_INSERT_TAKEOVER = Fast(INSERT_TAKEOVER)
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
    events = _EVENTS
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


def insert_outbox(
    conn: Connection, store: StoreBase, messages: Sequence[OutboxMessage], now: datetime
) -> None:
    """Queue chat messages in the caller's transaction; a dedupe key seen before is skipped."""
    if not messages:
        return
    mark_ready(conn, OUTBOX_READY)
    store.fast_insert_ignore_on(t.outbox, "dedupe_key")(
        conn,
        [
            {
                "dedupe_key": m.dedupe_key,
                "channel": m.channel,
                "kind": m.kind,
                "run_id": m.run_id,
                "request_id": m.request_id,
                "payload": m.payload,
                "status": "pending",
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
            for m in messages
        ],
    )
