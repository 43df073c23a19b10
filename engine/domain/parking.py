"""The takeover request a parked step asks for: who decides, until when, where the card goes,
and what the card shows (the exact arguments of the step that will run once it is approved)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from engine.domain.approvers import approvers_as_written
from engine.domain.binding import binding_hash
from engine.domain.errors import StepError
from engine.domain.expiry import deadline
from engine.domain.expressions import evaluate, render_text
from engine.domain.model import (
    SIDE_EFFECTING,
    JournalEvent,
    NewEvent,
    Node,
    Run,
    TakeoverKind,
    TakeoverRequest,
    TakeoverStatus,
    Workflow,
)
from engine.domain.replay import default_reason

# ``steps.lookup`` or ``steps["lookup"]`` inside a template: an earlier step's output that the
# approval's reason or the approved step's arguments are made from.
_STEP_REFERENCE = re.compile(
    r"\bsteps\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*['\"]([^'\"]+)['\"]\s*\])"
)
MAX_STEP_OUTPUTS = 5


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
    written: Sequence[str] = (),
) -> TakeoverRequest:
    """The request for ``node``. An approval node shows the arguments of the side-effecting
    step that follows it; a gate diversion shows its own step's (``target``, ``args``).
    ``approvers`` and ``escalate_to`` are people (groups expanded); ``written`` the names they
    were written as, kept so that a decision is judged under the groups in force then."""
    details: dict[str, Any] = {
        "workflow": run.workflow,
        "agent": run.agent,
        "nodeType": node.type.value,
        **approvers_as_written(written),
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
    referenced = [node.reason, target.args if target is not None else None]
    outputs = step_outputs(referenced, context)
    if outputs:
        details["stepOutputs"] = outputs
    chosen_channels = tuple(channels if channels is not None else node.channels)
    expires_at = deadline(now, node.timeout_minutes)
    return TakeoverRequest(
        id=request_id,
        run_id=run.id,
        step_id=node.id,
        kind=kind,
        status=TakeoverStatus.PENDING,
        reason=render_text(node.reason or default_reason(node, kind), context),
        created_at=now,
        expires_at=expires_at,
        approvers=tuple(approvers),
        approvals_required=node.approvals_required,
        allow_self_approval=node.allow_self_approval,
        timeout_behavior=node.timeout_behavior,
        channels=chosen_channels,
        requested_by=run.requested_by,
        details=details,
        deny_reason_required=node.deny_reason_required,
        remind_at=(
            expires_at - timedelta(minutes=node.remind_before_minutes)
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


def takeover_requested(request: TakeoverRequest, *, delivered: bool = True) -> NewEvent:
    """The ``takeover_requested`` event of ``request``, journaled at its step. ``delivered``
    (a step parked on it: approval node, gate diversion, held call) adds where its card goes
    and when it expires; an operator's takeover journals neither, as it always has."""
    data: dict[str, Any] = {
        "requestId": request.id,
        "kind": request.kind.value,
        "reason": request.reason,
    }
    if delivered:
        data["channels"] = list(request.channels)
        data["expiresAt"] = request.expires_at.isoformat()
    return NewEvent(JournalEvent.TAKEOVER_REQUESTED, request.step_id, data)


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)


def step_outputs(templates: Any, context: dict[str, Any]) -> list[dict[str, Any]]:
    """``[{stepId, output}]`` of the completed steps these templates read, in the order they
    are first named (at most ``MAX_STEP_OUTPUTS``): the card shows what the approval rests on,
    e.g. the lookup whose amount is about to be refunded."""
    done = context.get("steps", {})
    named: list[str] = []
    for text in _texts(templates):
        if "{" not in text:
            continue
        for match in _STEP_REFERENCE.finditer(text):
            step = match.group(1) or match.group(2)
            if step in done and step not in named:
                named.append(step)
    return [{"stepId": s, "output": done[s].get("output")} for s in named[:MAX_STEP_OUTPUTS]]
