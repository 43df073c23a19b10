"""The contracts other modules code against: buttons, verbs, data, states, dates, notices."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jinja2
import pytest
from cardchecks import (
    assert_valid_html,
    assert_valid_slack,
    assert_valid_teams,
    omitted_after,
    slack_arguments,
    teams_arguments,
    web_arguments,
)

from cards.render import render_notice
from cards.samples import SAMPLE_NOTICES, STATES, sample_request, sample_run, sample_view
from cards.slack.limits import SLACK_MAX_TOTAL_TEXT, blocks_text_length
from cards.slack.render import render_slack_card
from cards.slack.templating import SLACK
from cards.teams.limits import TEAMS_MAX_CARD_BYTES
from cards.teams.render import render_teams_card
from cards.teams.templating import TEAMS
from cards.templating import UnescapedValue
from cards.text import canonical_json
from cards.view import build_view
from cards.web.render import render_web_card

FINAL = ("released", "denied", "expired", "cancelled")


def _buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_slack_pending_offers_approve_deny_take_over() -> None:
    buttons = _buttons(render_slack_card(sample_view("pending")))
    assert [(b["action_id"], b["text"]["text"], b["value"]) for b in buttons] == [
        ("signoff_grant", "Approve", "tk_7f3a9c"),
        ("signoff_deny", "Deny", "tk_7f3a9c"),
        ("signoff_takeover", "Take over", "tk_7f3a9c"),
    ]


def test_slack_taken_over_offers_release_only() -> None:
    buttons = _buttons(render_slack_card(sample_view("granted")))
    assert [(b["action_id"], b["value"]) for b in buttons] == [("signoff_release", "tk_7f3a9c")]


@pytest.mark.parametrize("state", FINAL)
def test_final_states_have_no_buttons_and_say_who_and_when(state: str) -> None:
    slack = render_slack_card(sample_view(state))
    assert _buttons(slack) == []
    text = json.dumps(slack, ensure_ascii=False)
    assert "<!date^" in text and "UTC>" in text  # Slack date token with a plain fallback
    teams = render_teams_card(sample_view(state))
    assert "actions" not in teams and "refresh" not in teams
    assert "{{DATE(" in json.dumps(teams) and "{{TIME(" in json.dumps(teams)
    web = render_web_card(sample_view(state), csrf_token="t", form_action="/decide")
    assert "<form" not in web and "<button" not in web and "<time datetime=" in web
    who = {"released": "alice, bob", "denied": "bob", "expired": "no decision", "cancelled": "dave"}
    for rendered in (json.dumps(slack, ensure_ascii=False), json.dumps(teams), web):
        assert who[state] in rendered


def test_teams_pending_actions_and_refresh() -> None:
    card = render_teams_card(sample_view("pending"), refresh_user_ids=[f"u{i}" for i in range(70)])
    assert card["refresh"]["action"] == {
        "type": "Action.Execute",
        "verb": "refresh",
        "title": "Refresh",
        "data": {"requestId": "tk_7f3a9c"},
    }
    assert len(card["refresh"]["userIds"]) == 60
    grant, deny, takeover = card["actions"]
    assert (grant["type"], grant["verb"], grant["data"]) == (
        "Action.Execute",
        "grant",
        {"requestId": "tk_7f3a9c"},
    )
    assert takeover["verb"] == "takeover" and takeover["data"] == {"requestId": "tk_7f3a9c"}
    assert deny["type"] == "Action.ShowCard"
    (reason,) = deny["card"]["body"]
    assert reason["type"] == "Input.Text" and reason["id"] == "reason"
    assert reason["isRequired"] is False
    (confirm,) = deny["card"]["actions"]
    assert confirm["verb"] == "deny" and confirm["data"] == {"requestId": "tk_7f3a9c"}
    assert "userIds" not in render_teams_card(sample_view("pending"))["refresh"]


def test_teams_deny_reason_can_be_required() -> None:
    request = replace(sample_request(), deny_reason_required=True)
    view = build_view(request, None, approval_url=None, run_url=None)
    card = render_teams_card(view)
    assert card["actions"][1]["card"]["body"][0]["isRequired"] is True
    assert_valid_teams(card)
    assert "Reason (required to deny)" in render_web_card(view, csrf_token=None, form_action="/d")


def test_teams_taken_over_offers_release() -> None:
    card = render_teams_card(sample_view("granted"))
    assert [(a["verb"], a["data"]) for a in card["actions"]] == [
        ("release", {"requestId": "tk_7f3a9c"})
    ]
    assert card["refresh"]["action"]["verb"] == "refresh"


def test_web_forms_post_the_same_choices() -> None:
    web = render_web_card(sample_view("pending"), csrf_token="tok&", form_action="/approvals/x")
    assert '<form class="signoff-card__form" method="post" action="/approvals/x">' in web
    assert '<input type="hidden" name="csrf_token" value="tok&amp;">' in web
    assert '<input type="hidden" name="request_id" value="tk_7f3a9c">' in web
    assert 'name="reason"' in web
    for verb, label in (("grant", "Approve"), ("deny", "Deny"), ("takeover", "Take over")):
        assert f'name="action" value="{verb}"' in web and f">{label}</button>" in web
    granted = render_web_card(sample_view("granted"), csrf_token=None, form_action="/a")
    assert 'value="release"' in granted and "csrf_token" not in granted


def test_card_shows_every_field_of_the_issue() -> None:
    view = sample_view("pending")
    for rendered in (
        json.dumps(render_slack_card(view), ensure_ascii=False),
        json.dumps(render_teams_card(view), ensure_ascii=False),
        render_web_card(view, csrf_token=None, form_action=None),
    ):
        for expected in (
            "demo-ledger · refund",  # title
            "Refund 129.90 EUR for order A-1042",  # reason
            "support-bot",  # agent
            "refund-demo",  # workflow
            "run_51d2e0",  # run id
            "ledger-eu",  # account
            "9c1e5f0a7b3d",  # short binding hash
            "0.40",  # score
            "0.75",  # threshold
            "self-consistency",
            "2 of 5 samples said execute",
            "1 of 2 approvals",
            "https://signoff.example.com/",
        ):
            assert expected in rendered, expected


def test_policy_hold_is_shown() -> None:
    request = sample_request()
    details = dict(request.details, policy={"decision": "ask", "rule": "mailer.send"})
    view = build_view(replace(request, details=details), None, approval_url=None, run_url=None)
    assert "rule mailer.send" in json.dumps(render_slack_card(view), ensure_ascii=False)
    assert "rule mailer.send" in json.dumps(render_teams_card(view), ensure_ascii=False)


def test_step_result_feedback_buttons() -> None:
    data = SAMPLE_NOTICES["step_result"]  # type: ignore[index]
    slack = render_notice("step_result", "slack", **data)
    assert isinstance(slack, dict)
    assert [(b["action_id"], b["value"]) for b in _buttons(slack)] == [
        ("signoff_feedback_up", "run_51d2e0:refund"),
        ("signoff_feedback_down", "run_51d2e0:refund"),
    ]
    teams = render_notice("step_result", "teams", **data)
    assert isinstance(teams, dict)
    assert [(a["verb"], a["data"]) for a in teams["actions"]] == [
        ("feedback", {"runId": "run_51d2e0", "stepId": "refund", "score": 5}),
        ("feedback", {"runId": "run_51d2e0", "stepId": "refund", "score": 1}),
    ]


def test_decision_conflict_notice() -> None:
    slack = render_notice(
        "decision", "slack", actor="bob", verb="deny", status="denied", already_decided=True
    )
    assert "Already decided: *bob* denied this request." in json.dumps(slack, ensure_ascii=False)


def test_notice_fields_are_checked() -> None:
    with pytest.raises(TypeError):
        render_notice("expired", "slack", expired=None)
    with pytest.raises(ValueError):
        render_notice("nonsense", "slack")
    with pytest.raises(ValueError):
        render_notice("expired", "irc", **SAMPLE_NOTICES["expired"])  # type: ignore[arg-type,index]


@pytest.mark.parametrize("env", [SLACK, TEAMS])
def test_json_templates_refuse_unescaped_values(env: jinja2.Environment) -> None:
    with pytest.raises(UnescapedValue):
        env.from_string('{"text": "{{ value }}"}').render(value="<!channel>")


def test_large_arguments_are_truncated_with_a_count() -> None:
    args = {"blob": "x&<>" * 100_000, "deep": _nest(50)}
    view = sample_view("pending", args)
    canonical = canonical_json(args)

    slack = render_slack_card(view)
    assert_valid_slack(slack)
    shown, omitted = slack_arguments(slack)
    assert omitted is not None and omitted > 390_000
    assert omitted_after(canonical, shown) == omitted
    assert blocks_text_length(slack["blocks"]) <= SLACK_MAX_TOTAL_TEXT
    assert "full arguments on the approval page" in json.dumps(slack)

    teams = render_teams_card(view)
    assert_valid_teams(teams)
    shown, omitted = teams_arguments(teams)
    assert omitted is not None and omitted_after(canonical, shown) == omitted
    assert len(json.dumps(teams)) <= TEAMS_MAX_CARD_BYTES

    web = render_web_card(view, csrf_token=None, form_action=None)
    assert_valid_html(web)
    assert omitted_after(canonical, web_arguments(web)) == 0


def test_deep_arguments_fit_and_read_back() -> None:
    args = _nest(50)
    view = sample_view("pending", args)
    canonical = canonical_json(args)
    for message in (render_slack_card(view),):
        shown, omitted = slack_arguments(message)
        assert omitted_after(canonical, shown) == (omitted or 0)
    shown, omitted = teams_arguments(render_teams_card(view))
    assert omitted_after(canonical, shown) == (omitted or 0)


def test_unshowable_arguments_point_to_the_approval_page() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    view = sample_view("pending", deep)
    assert view.arguments_json is None and view.arguments_error
    assert "full arguments on the approval page" in json.dumps(render_slack_card(view))
    assert_valid_teams(render_teams_card(view))


def test_manual_takeover_without_arguments() -> None:
    from engine.domain.model import TakeoverKind, TakeoverStatus

    request = replace(sample_request(), kind=TakeoverKind.MANUAL, details={})
    view = build_view(request, sample_run(), approval_url=None, run_url=None)
    assert view.title == "Take over run run_51d2e0"
    for state in STATES:
        assert_valid_slack(render_slack_card(replace(view, status=TakeoverStatus(state))))
        assert_valid_teams(render_teams_card(replace(view, status=TakeoverStatus(state))))


def _nest(depth: int) -> Any:
    value: Any = {"leaf": "v"}
    for i in range(depth):
        value = {f"level{i}": [value, i]} if i % 2 else [value]
    return value
