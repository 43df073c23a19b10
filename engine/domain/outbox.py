"""The outbox's lifecycle and its order of delivery.

A message is written ``pending`` with the event that caused it. A dispatcher claims it for a
while (the claim is not a status: a lapsed claim leaves the message pending for the next
one), then marks it ``sent``, leaves it pending to retry at a later time, or marks it
``failed`` for good. Within a channel, updates of cards already posted go first: a decision's
card update must not wait behind a busy channel's queue of new cards.
"""

from __future__ import annotations

from enum import StrEnum

from engine.domain.model import OutboxRecord


class OutboxStatus(StrEnum):
    PENDING = "pending"  # to deliver (now, or at its next attempt)
    SENT = "sent"  # terminal: delivered
    FAILED = "failed"  # terminal: given up (a permanent error, or out of attempts)


OUTBOX_ALLOWED: dict[OutboxStatus, frozenset[OutboxStatus]] = {
    OutboxStatus.PENDING: frozenset({OutboxStatus.SENT, OutboxStatus.FAILED}),
    OutboxStatus.SENT: frozenset(),
    OutboxStatus.FAILED: frozenset(),
}

URGENT_KINDS = ("card_update",)  # claimed and sent before the rest of their channel


def priority(message: OutboxRecord) -> tuple[int, int]:
    """The order a channel's claimed messages go out in: card updates first, then by id."""
    return (0 if message.kind in URGENT_KINDS else 1, message.id)
