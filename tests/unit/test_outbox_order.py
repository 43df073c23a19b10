"""The order a channel's claimed outbox messages go out in (``engine.domain.outbox``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engine.domain.model import OutboxRecord
from engine.domain.outbox import delivery_order, is_urgent

AT = datetime(2026, 12, 5, tzinfo=UTC)


def row(id: int, kind: str, request: str, notice: str | None = None, ch: str = "slack:C1") -> Any:
    payload: dict[str, Any] = {"requestId": request}
    if notice is not None:
        payload["notice"] = notice
    return OutboxRecord(id, ch, kind, f"k{id}", payload, "run", request, 0, AT)


@pytest.mark.parametrize(
    ("message", "urgent"),
    [
        (row(1, "card_update", "r"), True),
        (row(1, "notice", "r", "decision"), True),
        (row(1, "notice", "r", "expired"), True),
        (row(1, "notice", "r", "reminder"), False),
        (row(1, "notice", "r", "step_result"), False),
        (row(1, "card", "r"), False),
    ],
)
def test_what_a_decision_changed_is_urgent(message: OutboxRecord, urgent: bool) -> None:
    assert is_urgent(message) is urgent


@pytest.mark.parametrize(
    ("rows", "order"),
    [
        # The first card posted, 39 new cards queued, then a decision on the first: its update
        # and notice go next.
        (
            [row(i, "card", f"r{i}") for i in range(2, 41)]
            + [row(41, "card_update", "r1"), row(42, "notice", "r1", "decision")],
            [41, 42, *range(2, 41)],
        ),
        # Decided before its card went out: the card goes first (its update finds nothing to
        # change, the card shows the decision), then the notice under it.
        (
            [
                row(1, "card", "a"),
                row(2, "card", "b"),
                row(3, "card_update", "b"),
                row(4, "notice", "b", "decision"),
            ],
            [3, 2, 4, 1],
        ),
        # Another channel's card is not this notice's.
        (
            [row(1, "card", "b", ch="slack:C2"), row(2, "notice", "b", "decision")],
            [2, 1],
        ),
        # A non-urgent notice keeps its place behind its card.
        ([row(1, "card", "a"), row(2, "notice", "a", "reminder")], [1, 2]),
    ],
)
def test_delivery_order(rows: list[OutboxRecord], order: list[int]) -> None:
    assert [m.id for m in delivery_order(reversed(rows))] == order
