"""Shared pieces of the SQL store: row conversion and the fenced journal append."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from engine.errors import NotFound, TransitionRefused
from engine.model import (
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
from engine.store import tables as t
from engine.store.db import Database, mark_ready


class StoreBase:
    """Holds the database; the mixins of ``SqlStore`` add the operations."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def insert_ignore(self, table: Any) -> Any:
        """An INSERT that does nothing when a unique key already exists."""
        dialect_insert = sqlite.insert if self.db.is_sqlite else postgresql.insert
        return dialect_insert(table)


def run_from_row(row: Any) -> Run:
    return Run(
        id=row["id"],
        workflow=row["workflow"],
        status=RunStatus(row["status"]),
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
        event=JournalEvent(row["event"]),
        step_id=row["step_id"],
        data=row["data"],
        at=row["at"],
    )


def append_journal(
    conn: Connection,
    run_id: str,
    events: Sequence[NewEvent],
    now: datetime,
    *,
    where: Sequence[ColumnElement[bool]] = (),
    values: Mapping[str, Any] | None = None,
    refused: str = "run is not in a state that allows this",
) -> int:
    """Append ``events`` to a run's journal, guarded by ``where`` on the run row (the fence: a
    lease owner, an expected status). Returns the sequence number of the first event appended.
    Raises ``TransitionRefused`` when the guard matches no row."""
    count = len(events)
    stmt = (
        update(t.runs)
        .where(t.runs.c.id == run_id, *where)
        .values(next_seq=t.runs.c.next_seq + count, updated_at=now, **(values or {}))
        .returning(t.runs.c.next_seq)
    )
    next_seq = (conn.execute(stmt)).scalar_one_or_none()
    if next_seq is None:
        current = (
            conn.execute(select(t.runs.c.status).where(t.runs.c.id == run_id))
        ).scalar_one_or_none()
        if current is None:
            raise NotFound(f"run {run_id} not found", run_id=run_id)
        raise TransitionRefused(refused, current=current, run_id=run_id)
    first = next_seq - count
    if events:
        conn.execute(
            insert(t.journal),
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


def insert_outbox(
    conn: Connection, store: StoreBase, messages: Sequence[OutboxMessage], now: datetime
) -> None:
    """Queue chat messages in the caller's transaction; a dedupe key seen before is skipped."""
    if not messages:
        return
    mark_ready(conn)
    stmt = store.insert_ignore(t.outbox).on_conflict_do_nothing(index_elements=["dedupe_key"])
    conn.execute(
        stmt,
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
