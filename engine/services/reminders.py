"""Reminders before expiry and escalations after a wait, as thread notices.

An approval node may say ``remindBeforeMinutes`` (a nudge that the request expires soon) and
``escalateAfterMinutes`` + ``escalateTo`` (ask more people when nobody decided in time). The
interpreter stores when each is due on the request (``remind_at``, ``escalate_at``); the sweeper
calls ``sweep`` on every pass, which queues each due notice exactly once: the store clears the
due time in the transaction that writes the outbox rows, and the dedupe key stops a repeat.

The notices name people, not platform ids (``people``, ``approvers``); each front end maps them
to its own mentions when it renders the notice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime

from engine.domain import notify
from engine.domain.model import OutboxMessage, TakeoverRequest
from engine.ports import Clock
from engine.ports.store import ReminderStore


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


async def sweep(store: ReminderStore, clock: Clock, wake: Callable[[], None] | None = None) -> int:
    """Queue every reminder and escalation due now; returns how many requests were notified."""
    now = clock.now()
    reminded, escalated = await store.queue_reminders(
        now, remind=reminder, escalate=lambda request: escalation(request, now)
    )
    count = len(reminded) + len(escalated)
    if count and wake is not None:
        wake()
    return count
