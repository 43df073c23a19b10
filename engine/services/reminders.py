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

from collections.abc import Callable

from engine.domain.reminders import reminder
from engine.ports import Clock
from engine.ports.store import ReminderStore


async def sweep(store: ReminderStore, clock: Clock, wake: Callable[[], None] | None = None) -> int:
    """Queue every reminder and escalation due now; returns how many requests were notified."""
    now = clock.now()
    reminded, escalated = await store.queue_reminders(now, remind=reminder)
    count = len(reminded) + len(escalated)
    if count and wake is not None:
        wake()
    return count
