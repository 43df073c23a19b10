"""An ``ApprovalView`` as JSON, for receivers that render approvals themselves (webhooks).

The values stay raw, exactly as the cards read them: a JSON receiver escapes for its own output,
and the arguments are the real JSON value (the one the binding hash covers), not a rendering.
Keys are camelCase like the REST API's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from cards.view import ApprovalView


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def view_json(view: ApprovalView) -> dict[str, Any]:
    """Everything a card shows, as one JSON object."""
    confidence = view.confidence
    return {
        "requestId": view.request_id,
        "runId": view.run_id,
        "stepId": view.step_id,
        "kind": view.kind.value,
        "status": view.status.value,
        "title": view.title,
        "reason": view.reason,
        "agent": view.agent,
        "workflow": view.workflow,
        "requestedBy": view.requested_by,
        "nodeType": view.node_type,
        "connector": view.connector,
        "action": view.action,
        "account": view.account,
        "arguments": None if view.arguments_json is None else json.loads(view.arguments_json),
        "argumentsError": view.arguments_error,
        "bindingHash": view.binding_hash,
        "confidence": None
        if confidence is None
        else {
            "score": confidence.score,
            "threshold": confidence.threshold,
            "estimator": confidence.estimator,
            "detail": confidence.detail,
            "decision": confidence.decision,
        },
        "policy": None
        if view.policy is None
        else {"decision": view.policy.decision, "rule": view.policy.rule},
        "createdAt": _iso(view.created_at),
        "expiresAt": _iso(view.expires_at),
        "expiresInMinutes": view.expires_in_minutes,
        "approvalsRequired": view.approvals_required,
        "approvals": [
            {"person": a.person, "at": _iso(a.at), "notes": a.notes} for a in view.approvals
        ],
        "quorum": view.quorum,
        "approvers": list(view.approvers),
        "decidedBy": view.decided_by,
        "decidedAt": _iso(view.decided_at),
        "notes": view.notes,
        "releasedBy": view.released_by,
        "releasedAt": _iso(view.released_at),
        "timeoutBehavior": view.timeout_behavior.value,
        "denyReasonRequired": view.deny_reason_required,
        "runStatus": None if view.run_status is None else view.run_status.value,
        "actions": list(view.actions),
        "approvalUrl": view.approval_url,
        "runUrl": view.run_url,
    }
