"""Rows of the runs, journal and takeover tables as the domain's records, and back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert

from engine.adapters.store import tables as t
from engine.adapters.store.fast import Fast
from engine.domain.model import (
    JournalEntry,
    JournalEvent,
    Run,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
    Vote,
)

FAST_INSERT_RUN = Fast(insert(t.runs))
FAST_INSERT_TAKEOVER = Fast(insert(t.takeover_requests))

# A replay reads every event of a run: a dict lookup costs a fraction of ``JournalEvent(v)``.
EVENTS = {e.value: e for e in JournalEvent}
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
        event=EVENTS[row["event"]],
        step_id=row["step_id"],
        data=row["data"],
        at=row["at"],
    )
