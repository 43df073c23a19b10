"""How engine records look in the API: camelCase JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.model import JournalEntry, Run, TakeoverRequest


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def run_json(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "workflow": run.workflow,
        "status": run.status.value,
        "input": run.input,
        "output": run.output,
        "error": run.error,
        "requestedBy": run.requested_by,
        "agent": run.agent,
        "parentRunId": run.parent_run_id,
        "parentStepId": run.parent_step_id,
        "idempotencyKey": run.idempotency_key,
        "createdAt": iso(run.created_at),
        "updatedAt": iso(run.updated_at),
    }


def takeover_json(request: TakeoverRequest, public_url: str) -> dict[str, Any]:
    return {
        "id": request.id,
        "runId": request.run_id,
        "stepId": request.step_id,
        "kind": request.kind.value,
        "status": request.status.value,
        "reason": request.reason,
        "approvers": list(request.approvers),
        "approvalsRequired": request.approvals_required,
        "approvals": [
            {"person": v.person, "at": iso(v.at), "notes": v.notes} for v in request.votes
        ],
        "allowSelfApproval": request.allow_self_approval,
        "timeoutBehavior": request.timeout_behavior.value,
        "channels": list(request.channels),
        "details": request.details,
        "decidedBy": request.decided_by,
        "decidedAt": iso(request.decided_at),
        "notes": request.notes,
        "releasedBy": request.released_by,
        "releasedAt": iso(request.released_at),
        "sdpOffer": request.sdp_offer,
        "sdpAnswer": request.sdp_answer,
        "createdAt": iso(request.created_at),
        "expiresAt": iso(request.expires_at),
        "approvalUrl": approval_url(public_url, request.id),
    }


def approval_url(public_url: str, request_id: str) -> str:
    return f"{public_url.rstrip('/')}/approvals/{request_id}"


def journal_json(entry: JournalEntry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "event": entry.event.value,
        "stepId": entry.step_id,
        "data": entry.data,
        "at": iso(entry.at),
    }
