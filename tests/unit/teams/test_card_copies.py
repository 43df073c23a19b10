"""Which copies of a request's Teams card a ``card_update`` row updates
(``bot.teams.sink.owned_copies``): every copy is updated once, by one row, whatever channels
the request names."""

from __future__ import annotations

import pytest

from bot.teams.sink import owned_copies
from engine.domain.model import ChatMessageRef, TakeoverRequest, TakeoverStatus
from tests.support.requests import takeover_request

OPS = ChatMessageRef("run1", "r1", "teams:ops", "teams", "card", "1", {})
BOB = ChatMessageRef("run1", "r1", "teams:@bob", "teams", "card", "2", {"person": "bob"})
CAROL = ChatMessageRef("run1", "r1", "teams:@carol", "teams", "card", "3", {"person": "carol"})
LISTED = ChatMessageRef("run1", "r1", "teams:reply/a:1bob", "teams", "card", "4", {"outbox": 9})
COPIES = [OPS, BOB, CAROL, LISTED]


def request(*channels: str) -> TakeoverRequest:
    return takeover_request(
        id="r1", run_id="run1", status=TakeoverStatus.GRANTED, channels=channels
    )


@pytest.mark.parametrize(
    ("channels", "row", "updated"),
    [
        # The first teams: channel's row also updates the cards "pending" listed; each
        # person's copy (teams:@finance, expanded when the request was made) is its own row's.
        (("web", "teams:ops", "teams:@bob", "teams:@carol"), "teams:ops", [OPS, LISTED]),
        (("web", "teams:ops", "teams:@bob", "teams:@carol"), "teams:@bob", [BOB]),
        (("teams:@bob", "teams:@carol", "teams:ops"), "teams:@bob", [BOB, LISTED]),
        (("teams:@bob", "teams:@carol", "teams:ops"), "teams:@carol", [CAROL]),
        (("teams:@bob", "teams:@carol", "teams:ops"), "teams:ops", [OPS]),
        # A channel the request names but nothing was posted for updates nothing.
        (("teams:ops", "teams:other"), "teams:other", []),
    ],
)
def test_each_copy_is_updated_by_exactly_one_row(
    channels: tuple[str, ...], row: str, updated: list[ChatMessageRef]
):
    assert owned_copies(COPIES, row, request(*channels)) == updated


@pytest.mark.parametrize(
    "channels", [("teams:ops", "teams:@bob", "teams:@carol"), ("teams:@bob", "teams:@carol")]
)
def test_no_copy_is_left_out_or_updated_twice(channels: tuple[str, ...]):
    req = request(*channels)
    copies = [c for c in COPIES if c.channel in channels or c is LISTED]
    rows = [c for c in channels if c.startswith("teams:")]
    seen = [copy for row in rows for copy in owned_copies(copies, row, req)]
    assert sorted(c.message_ref for c in seen) == sorted(c.message_ref for c in copies)
