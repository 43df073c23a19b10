"""The notices a waiting request sends before its deadline and after a wait: a reminder that
it expires soon (``remindBeforeMinutes``) and an escalation naming the people now asked
(``escalateAfterMinutes`` + ``escalateTo``; ``engine.domain.approvers.escalated_approvers``
says who may then decide). Pure: the sweeper (``engine.services.reminders``) queues them once,
when due. The notices name people, not platform ids; each channel maps them to its mentions."""

from __future__ import annotations

import math
from datetime import datetime

from engine.domain import notify
from engine.domain.model import OutboxMessage, TakeoverRequest


def reminder(request: TakeoverRequest) -> list[OutboxMessage]:
    """``notice: reminder`` into each channel of the request: it expires at ``expiresAt``."""
    data = {
        "requestId": request.id,
        "expiresAt": request.expires_at.isoformat(),
        "approvers": list(request.approvers),
    }
    return notify.notice(
        request.channels, request.run_id, "reminder", request.id, data, request_id=request.id
    )


def escalation(request: TakeoverRequest, now: datetime) -> list[OutboxMessage]:
    """``notice: escalated`` into each channel of the request, naming the people asked."""
    data = {
        "requestId": request.id,
        "people": list(request.escalate_to),
        "waitedMinutes": math.floor((now - request.created_at).total_seconds() / 60),
    }
    return notify.notice(
        request.channels, request.run_id, "escalated", request.id, data, request_id=request.id
    )
