"""Cards are measured as Teams measures messages, so arguments in non-Latin scripts get the
room they take: a CJK character is 3 bytes of the activity in UTF-8 (2 in UTF-16), and used to
be charged 12 against the card's budget (twice its 6-character ``\\uXXXX`` escape)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from teamsharness import BOT, CHANNEL, TENANT

from bot.teams.adapter import Outgoing, TeamsAdapter
from cards.samples import sample_view
from cards.teams.limits import TEAMS_MAX_CARD_BYTES
from cards.teams.render import render_teams_card
from engine.config.channels import TeamsConfig
from tests.fakes.teams import FakeConnector


@pytest.fixture
async def connector():
    async with FakeConnector() as fake:
        yield fake


def utf8_size(activity: dict[str, Any]) -> int:
    return len(json.dumps(activity, ensure_ascii=False).encode())


async def post_card(connector: FakeConnector, args: dict[str, Any]) -> dict[str, Any]:
    """Render the approval card for ``args`` and send it as the sink does; returns the activity
    the connector received."""
    reference = {
        "serviceUrl": connector.service_url,
        "channelId": "msteams",
        "bot": dict(BOT),
        "conversation": {"id": CHANNEL, "conversationType": "channel", "tenantId": TENANT},
    }
    card = render_teams_card(sample_view("pending", args))
    activity_id = await TeamsAdapter(TeamsConfig()).send(reference, Outgoing(card=card))
    return connector.current(activity_id)


async def test_cjk_arguments_that_fit_are_shown_whole(connector: FakeConnector):
    # 4,000 characters: 12,000 bytes of UTF-8, 8,000 of UTF-16, and 48,000 as charged before.
    note = ("审批退款订单" * 700)[:4000]
    activity = await post_card(connector, {"note": note})
    shown = json.dumps(activity, ensure_ascii=False)
    assert note in shown and "more characters" not in shown
    assert utf8_size(activity) <= TEAMS_MAX_CARD_BYTES


async def test_cjk_arguments_too_large_are_cut_to_fit_not_to_a_quarter(connector: FakeConnector):
    note = "审批退款订单" * 10_000  # 180 KB of UTF-8
    activity = await post_card(connector, {"note": note})
    shown = json.dumps(activity, ensure_ascii=False)
    assert "审批退款订单" * 100 in shown and note not in shown and "more characters" in shown
    size = utf8_size(activity)
    assert size <= TEAMS_MAX_CARD_BYTES
    assert size >= 20_000  # the room is used: before, cut to about 8 KB
