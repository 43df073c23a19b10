"""A request a delegate decides for someone away says so on every card: "bob decides for
alice, who is away" beside the approvers (words.j2's ``AWAY``), each card still valid."""

from __future__ import annotations

import dataclasses
import json

from cardchecks import assert_valid_html, assert_valid_slack, assert_valid_teams

from cards.samples import SAMPLE_NOW, sample_request, sample_run
from cards.slack.render import render_slack_card
from cards.teams.render import render_teams_card
from cards.view import ApprovalView, build_view
from cards.web.render import render_web_card
from engine.domain.delegation import Absence, delegated

SAID = "bob decides for alice, who is away"


def _view() -> ApprovalView:
    absence = Absence("alice", "bob", SAMPLE_NOW, set_by="alice", set_at=SAMPLE_NOW)
    request = dataclasses.replace(sample_request(), approvers=("alice", "carol"))
    request = delegated(request, {"alice": absence})
    assert request.approvers == ("alice", "carol", "bob")
    return build_view(request, sample_run(), approval_url=None, run_url=None, now=SAMPLE_NOW)


def test_every_card_says_who_decides_for_whom() -> None:
    view = _view()
    assert view.delegates == (("bob", "alice"),)
    slack = render_slack_card(view)
    assert_valid_slack(slack)
    assert SAID in json.dumps(slack)
    teams = render_teams_card(view)
    assert_valid_teams(teams)
    assert SAID in json.dumps(teams)
    web = render_web_card(view, csrf_token="t", form_action="/a")
    assert_valid_html(web)
    assert SAID in web


def test_a_card_without_delegates_says_nothing_of_it() -> None:
    view = build_view(sample_request(), sample_run(), approval_url=None, run_url=None)
    assert view.delegates == ()
    assert "who is away" not in json.dumps(render_slack_card(view))
    assert "who is away" not in json.dumps(render_teams_card(view))
    assert "who is away" not in render_web_card(view, csrf_token="t", form_action="/a")
