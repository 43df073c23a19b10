"""The outbox's lifecycle and its order of delivery.

A message is written ``pending`` with the event that caused it. A dispatcher claims it for a
while (the claim is not a status: a lapsed claim leaves the message pending for the next
one), then marks it ``sent``, leaves it pending to retry at a later time, or marks it
``failed`` for good. Within a channel, what a decision changes goes first: the update of its
card and the notice that says who decided. Neither may wait behind a busy channel's queue of
new cards (the notice once came 71-83 s after the click, behind 40 queued cards, while the card
update took 2 s).
"""

from __future__ import annotations

from collections.abc import Iterable
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
# Notices about a decided request (``engine.domain.notify.card_changed``): they go with its
# card update, in the order they were queued (the update first).
URGENT_NOTICES = ("decision", "expired")


def is_urgent(message: OutboxRecord) -> bool:
    """Whether ``message`` goes before its channel's other messages: a card update, or the
    notice of the decision that caused one."""
    if message.kind in URGENT_KINDS:
        return True
    return message.kind == "notice" and message.payload.get("notice") in URGENT_NOTICES


def priority(message: OutboxRecord) -> tuple[int, int]:
    """The order a channel's claimed messages go out in: what a decision changed first, then by
    id."""
    return (0 if is_urgent(message) else 1, message.id)


def delivery_order(messages: Iterable[OutboxRecord]) -> list[OutboxRecord]:
    """Claimed messages in the order they go out: by ``priority``, except that a request's new
    card goes before an urgent notice about it. A notice replies under its card, and only the
    card's own row may post the card (two deliverers would post it twice), so a notice ahead of
    a card still queued would only wait for it, holding the channel up behind it."""
    ordered = sorted(messages, key=priority)
    cards: dict[tuple[str, str | None], OutboxRecord] = {
        (m.channel, m.request_id): m for m in ordered if m.kind == "card" and m.request_id
    }
    out: list[OutboxRecord] = []
    placed: set[int] = set()
    for message in ordered:
        if message.id in placed:
            continue
        card = cards.get((message.channel, message.request_id))
        if message.kind == "notice" and card is not None and card.id not in placed:
            out.append(card)
            placed.add(card.id)
        out.append(message)
        placed.add(message.id)
    return out
