"""bot.web.approval.decided_note: what an approval page says of a request that ended, in a
person's words (the page shows it above the card, and says it again live when it ends)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.web.approval import decided_note
from engine.domain.model import TakeoverStatus
from tests.support.requests import NOW, takeover_request

LATER = NOW + timedelta(minutes=2, seconds=30)


@pytest.mark.parametrize(
    ("fields", "note"),
    [
        (
            {"status": TakeoverStatus.DENIED, "decided_by": "bob", "decided_at": NOW,
             "notes": "not this month"},
            "Denied by bob 2 min ago: not this month",
        ),
        (
            {"status": TakeoverStatus.RELEASED, "decided_by": "carol", "decided_at": NOW,
             "released_by": "carol", "released_at": NOW},
            "Approved by carol 2 min ago.",
        ),
        (
            {"status": TakeoverStatus.RELEASED, "decided_by": "bob", "decided_at": NOW,
             "released_by": "alice", "released_at": LATER},
            "Taken over by bob and released by alice just now.",
        ),
        ({"status": TakeoverStatus.CANCELLED}, "Cancelled."),
    ],
)  # fmt: skip
def test_an_ended_request_says_who_did_what_and_when(fields: dict[str, object], note: str) -> None:
    assert decided_note(takeover_request(**fields), LATER) == note
