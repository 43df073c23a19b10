"""The takeover request a parked step asks for: who decides, until when, where the card goes,
and what the card shows (the exact arguments of the step that will run once it is approved)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from engine.binding import binding_hash
from engine.errors import StepError
from engine.expressions import evaluate, render_text
from engine.model import (
    SIDE_EFFECTING,
    Node,
    Run,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    Workflow,
)
from engine.replay import default_reason


def build_request(
    *,
    request_id: str,
    now: datetime,
    run: Run,
    workflow: Workflow,
    node: Node,
    kind: TakeoverKind,
    context: dict[str, Any],
    args: Any,
    target: Node | None,
    confidence: dict[str, Any] | None,
    channels: Sequence[str] | None,
    approvers: Sequence[str],
    escalate_to: Sequence[str],
) -> TakeoverRequest:
    """The request for ``node``. An approval node shows the arguments of the side-effecting
    step that follows it; a gate diversion shows its own step's (``target``, ``args``)."""
    details: dict[str, Any] = {
        "workflow": run.workflow,
        "agent": run.agent,
        "nodeType": node.type.value,
    }
    if target is None and kind == TakeoverKind.NODE:
        target = workflow.successor(node)
        if target is not None and target.type in SIDE_EFFECTING:
            try:
                args = evaluate(dict(target.args), context)
            except StepError:
                target, args = None, None
        else:
            target = None
    if target is not None:
        details.update(
            stepId=target.id,
            connector=target.connector,
            action=target.action or target.function,
            args=args,
            bindingHash=binding_hash(target.connector, target.action, args),
        )
    if confidence is not None:
        details["confidence"] = confidence
    chosen_channels = tuple(channels if channels is not None else node.channels)
    return TakeoverRequest(
        id=request_id,
        run_id=run.id,
        step_id=node.id,
        kind=kind,
        status=TakeoverStatus.PENDING,
        reason=render_text(node.reason or default_reason(node, kind), context),
        created_at=now,
        expires_at=now + timedelta(minutes=node.timeout_minutes),
        approvers=tuple(approvers),
        approvals_required=node.approvals_required,
        allow_self_approval=node.allow_self_approval,
        timeout_behavior=node.timeout_behavior,
        channels=chosen_channels,
        requested_by=run.requested_by,
        details=details,
        deny_reason_required=node.deny_reason_required,
        remind_at=(
            now + timedelta(minutes=node.timeout_minutes - node.remind_before_minutes)
            if node.remind_before_minutes
            else None
        ),
        escalate_at=(
            now + timedelta(minutes=node.escalate_after_minutes)
            if node.escalate_after_minutes
            else None
        ),
        escalate_to=tuple(escalate_to),
    )
