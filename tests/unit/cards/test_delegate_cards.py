"""A request a delegate decides for someone away says so on every card: "bob decides for
alice, who is away" beside the approvers (words.j2's ``AWAY``), each card still valid."""

from __future__ import annotations

import dataclasses
import json

import pytest
from cardchecks import VALID

from cards.render import card_channels, render_card
from cards.samples import SAMPLE_NOW, sample_request, sample_run
from cards.view import ApprovalView, build_view
from engine.domain.delegation import Absence, delegated

SAID = "bob decides for alice, who is away"


def _view() -> ApprovalView:
    absence = Absence("alice", "bob", SAMPLE_NOW, set_by="alice", set_at=SAMPLE_NOW)
    request = dataclasses.replace(sample_request(), approvers=("alice", "carol"))
    request = delegated(request, {"alice": absence})
    assert request.approvers == ("alice", "carol", "bob")
    return build_view(request, sample_run(), approval_url=None, run_url=None, now=SAMPLE_NOW)


@pytest.mark.parametrize("channel", card_channels())
def test_every_card_says_who_decides_for_whom(channel: str) -> None:
    view = _view()
    assert view.delegates == (("bob", "alice"),)
    card = render_card(channel, view)
    VALID[channel](card)
    assert SAID in json.dumps(card, ensure_ascii=False)


@pytest.mark.parametrize("channel", card_channels())
def test_a_card_without_delegates_says_nothing_of_it(channel: str) -> None:
    view = build_view(sample_request(), sample_run(), approval_url=None, run_url=None)
    assert view.delegates == ()
    assert "who is away" not in json.dumps(render_card(channel, view))
