"""How engine records look in the API: camelCase JSON, and the JSON Schema of each shape
(``SCHEMAS``, published in ``/openapi.json`` under ``components.schemas``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.api.routing import obj
from engine.domain.model import (
    JournalEntry,
    JournalEvent,
    Run,
    RunStatus,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    TimeoutBehavior,
)


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


def approval_entry_json(
    request: TakeoverRequest, run: Run | None, workflow: str | None, public_url: str
) -> dict[str, Any]:
    """A request in the approval queue: the request, its workflow and its run's status."""
    return {
        **takeover_json(request, public_url),
        "workflow": workflow,
        "runStatus": run.status.value if run is not None else None,
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


# -- the shapes above as JSON Schema ---------------------------------------------------------

_STR = {"type": "string"}
_TEXT = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}
_MAYBE_TIME = {"type": ["string", "null"], "format": "date-time"}
_STRINGS = {"type": "array", "items": _STR}


def _enum(values: type[Any]) -> dict[str, Any]:
    return {"type": "string", "enum": [v.value for v in values]}


def _record(properties: dict[str, Any]) -> dict[str, Any]:
    """An object with exactly ``properties``, every one always present."""
    return obj(properties, tuple(properties))


SCHEMAS: dict[str, dict[str, Any]] = {
    "Run": _record(
        {
            "id": _STR,
            "workflow": _STR,
            "status": _enum(RunStatus),
            "input": {"type": "object"},
            "output": {},
            "error": _TEXT,
            "requestedBy": _TEXT,
            "agent": _TEXT,
            "parentRunId": _TEXT,
            "parentStepId": _TEXT,
            "idempotencyKey": _TEXT,
            "createdAt": _TIME,
            "updatedAt": _TIME,
        }
    ),
    "TakeoverRequest": _record(
        {
            "id": _STR,
            "runId": _STR,
            "stepId": _TEXT,
            "kind": _enum(TakeoverKind),
            "status": _enum(TakeoverStatus),
            "reason": _STR,
            "approvers": _STRINGS,
            "approvalsRequired": {"type": "integer", "minimum": 1},
            "approvals": {
                "type": "array",
                "items": _record({"person": _STR, "at": _TIME, "notes": _TEXT}),
            },
            "allowSelfApproval": {"type": "boolean"},
            "timeoutBehavior": _enum(TimeoutBehavior),
            "channels": _STRINGS,
            "details": {"type": "object"},
            "decidedBy": _TEXT,
            "decidedAt": _MAYBE_TIME,
            "notes": _TEXT,
            "releasedBy": _TEXT,
            "releasedAt": _MAYBE_TIME,
            "sdpOffer": _TEXT,
            "sdpAnswer": _TEXT,
            "createdAt": _TIME,
            "expiresAt": _TIME,
            "approvalUrl": _STR,
        }
    ),
    "JournalEntry": _record(
        {
            "seq": {"type": "integer"},
            "event": _enum(JournalEvent),
            "stepId": _TEXT,
            "data": {"type": "object"},
            "at": _TIME,
        }
    ),
}


SCHEMAS["Approval"] = _record(
    {
        **SCHEMAS["TakeoverRequest"]["properties"],
        "workflow": _TEXT,
        "runStatus": {"type": ["string", "null"], "enum": [*(s.value for s in RunStatus), None]},
    }
)


def ref(name: str) -> dict[str, str]:
    """A reference to one of ``SCHEMAS``."""
    assert name in SCHEMAS, name
    return {"$ref": f"#/components/schemas/{name}"}


def list_of(key: str, name: str, **more: dict[str, Any]) -> dict[str, Any]:
    """``{key: [<name>, ...], **more}``."""
    return _record({key: {"type": "array", "items": ref(name)}, **more})
