"""Hostile values in every field that can carry outside text, on every platform: they show as
literal text and never ping, link, render markup or hide characters."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

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

from cards.render import NoticeKind, render_notice
from cards.samples import APPROVAL_URL, RUN_URL, sample_request, sample_run
from cards.slack.render import render_slack_card
from cards.teams.render import render_teams_card
from cards.text import canonical_json
from cards.view import ApprovalView, build_view
from cards.web.render import render_web_card
from engine.domain.model import TakeoverStatus
from tests.support.hostile import HIDDEN, HOSTILE

OUR_LINK = re.compile(r"<https://signoff\.example\.com/[^|<>]*\|[^<>]*>")
SLACK_DATE = re.compile(r"<!date\^\d+\^\{date_short_pretty\} at \{time\}\|[^<>]*>")
AC_FUNCTION = re.compile(r"\{\{[A-Z]{4}\(")
HOSTILE_MARKERS = ("channel", "U123", "here", "evil", "<b>", "script", "fdp", "pal", "bold")


def hostile_view(value: str, status: TakeoverStatus = TakeoverStatus.PENDING) -> ApprovalView:
    request = sample_request("denied" if status is TakeoverStatus.DENIED else "pending")
    details = dict(request.details)
    details.update(
        {
            "args": {"to": value, value: [value, {"nested": value}]},
            "summary": value,
            "agent": value,
            "account": value,
            "connector": value,
            "action": value,
            "workflow": value,
            "policy": {"decision": "ask", "rule": value},
            "confidence": {"score": 0.5, "threshold": 0.75, "estimator": value, "detail": value},
        }
    )
    request = replace(
        request,
        reason=value,
        details=details,
        approvers=(value, "alice"),
        requested_by=value,
        notes=value if status is not TakeoverStatus.PENDING else None,
        decided_by=value if status is not TakeoverStatus.PENDING else None,
    )
    return build_view(
        request, sample_run(), approval_url=APPROVAL_URL, run_url=RUN_URL,
        now=datetime(2025, 3, 14, 9, 30, tzinfo=UTC),
    )  # fmt: skip


def _strings(node: Any) -> list[str]:
    """Every displayed string: button values and action data go back to us unchanged, so
    they are exact rather than shown, and are left out."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for k, v in node.items() if k not in ("value", "data") for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def _objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for v in node.values():
            found.extend(_objects(v))
    elif isinstance(node, list):
        for v in node:
            found.extend(_objects(v))
    return found


def assert_slack_safe(message: dict[str, Any]) -> None:
    assert_valid_slack(message)
    for obj in _objects(message):
        if obj.get("type") == "mrkdwn":
            assert obj.get("verbatim") is True, obj  # no auto-links, no @here parsing
    for text in _strings(message):
        leftover = SLACK_DATE.sub("", OUR_LINK.sub("", text))
        # Every "<" left is hostile text, and it must have been escaped away.
        assert "<" not in leftover and ">" not in leftover, text
        assert not HIDDEN.search(text), text


def assert_teams_safe(card: dict[str, Any]) -> None:
    assert_valid_teams(card)
    for obj in _objects(card):
        if obj.get("type") == "TextBlock":  # markdown: only Signoff's own words go here
            assert not any(m in obj["text"] for m in HOSTILE_MARKERS), obj["text"]
        if obj.get("type") == "TextRun":
            assert not AC_FUNCTION.search(obj["text"]), obj["text"]
        if obj.get("type") == "Action.OpenUrl":
            assert obj["url"].startswith("https://signoff.example.com/"), obj
    assert not any(HIDDEN.search(s) for s in _strings(card))


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v or "" for k, v in attrs if k in ("href", "src", "action")]


def assert_web_safe(fragment: str, form_action: str | None = None) -> None:
    assert_valid_html(fragment)  # any hostile tag would be an unexpected element
    assert not HIDDEN.search(fragment)
    links = _Links()
    links.feed(fragment)
    for url in links.urls:
        assert url == form_action or url.startswith("https://signoff.example.com/"), url


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("status", [TakeoverStatus.PENDING, TakeoverStatus.DENIED])
def test_hostile_values_in_a_card(name: str, status: TakeoverStatus) -> None:
    view = hostile_view(HOSTILE[name], status)
    canonical = canonical_json(view_args(view))

    slack = render_slack_card(view)
    assert_slack_safe(slack)
    shown, omitted = slack_arguments(slack)
    assert omitted_after(canonical, shown) == (omitted or 0) == 0

    teams = render_teams_card(view)
    assert_teams_safe(teams)
    shown, omitted = teams_arguments(teams)
    assert omitted_after(canonical, shown) == (omitted or 0) == 0

    web = render_web_card(view, csrf_token='"><script>x</script>', form_action="/decide")
    assert_web_safe(web, "/decide")
    assert omitted_after(canonical, web_arguments(web)) == 0


def view_args(view: ApprovalView) -> Any:
    assert view.arguments_json is not None
    return json.loads(view.arguments_json)


def test_literal_forms_are_what_people_see() -> None:
    """Spot checks of the exact shown text, per platform."""
    view = hostile_view("<!channel> \u202e @here")
    slack = json.dumps(render_slack_card(view), ensure_ascii=False)
    assert "&lt;!channel&gt; \\\\u202e @here" in slack
    teams = json.dumps(render_teams_card(view), ensure_ascii=False)
    assert "<!channel> \\\\u202e @here" in teams
    web = render_web_card(view, csrf_token=None, form_action=None)
    assert "&lt;!channel&gt; \\u202e @here" in web
    assert "<form" not in web  # no form without a form action


def test_date_function_lookalike_is_broken_only_for_teams() -> None:
    view = hostile_view(HOSTILE["ac_date"])
    teams = json.dumps(render_teams_card(view))
    assert "\\\\u007b{DATE(2017-02-14T06:08:39Z, SHORT)}}" in teams
    assert "{{DATE(2017-02-14T06:08:39Z, SHORT)}}" in json.dumps(render_slack_card(view))


def test_backticks_cannot_close_the_slack_code_block() -> None:
    view = hostile_view("a```b`c``d`")
    shown, _ = slack_arguments(render_slack_card(view))
    assert "``" not in shown
    assert "\\u0060\\u0060\\u0060" in shown and "b`c" in shown


NOTICE_DATA: dict[NoticeKind, dict[str, Any]] = {
    NoticeKind.CONFIDENCE: {"score": 0.2, "threshold": 0.75, "decision": "divert"},
    NoticeKind.DECISION: {"verb": "deny", "status": "denied"},
    NoticeKind.REMINDER: {"expires_at": datetime(2025, 3, 14, 10, tzinfo=UTC)},
    NoticeKind.EXPIRED: {"expired_at": datetime(2025, 3, 14, 10, tzinfo=UTC)},
    NoticeKind.ESCALATED: {},
    NoticeKind.STEP_RESULT: {"run_id": "run_1", "ok": False},
}
NOTICE_TEXT_FIELDS: dict[NoticeKind, tuple[str, ...]] = {
    NoticeKind.CONFIDENCE: ("estimator", "detail", "step_id", "node_type", "agent"),
    NoticeKind.DECISION: ("actor", "notes", "title", "quorum"),
    NoticeKind.REMINDER: ("title", "quorum"),
    NoticeKind.EXPIRED: ("title", "timeout_behavior"),
    NoticeKind.ESCALATED: ("title",),
    NoticeKind.STEP_RESULT: ("step_id", "error"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("kind", list(NoticeKind))
def test_hostile_values_in_notices(name: str, kind: NoticeKind) -> None:
    value = HOSTILE[name]
    data = dict(NOTICE_DATA[kind]) | {f: value for f in NOTICE_TEXT_FIELDS[kind]}
    if kind in (NoticeKind.REMINDER, NoticeKind.ESCALATED):
        data["mentions"] = [value, "U012ABCDEF"]
        data["approval_url"] = "javascript:alert(1)"
    if kind is NoticeKind.STEP_RESULT:
        data["run_url"] = value
    slack = render_notice(kind, "slack", **data)
    assert isinstance(slack, dict)
    assert all(o.get("verbatim") is True for o in _objects(slack) if o.get("type") == "mrkdwn")
    for text in _strings(slack):  # the one real mention is the well-formed id
        assert_slack_text_safe(text.replace("<@U012ABCDEF>", ""))
    assert_valid_slack(slack)
    teams = render_notice(kind, "teams", **data)
    assert isinstance(teams, dict)
    assert_teams_safe(teams)
    web = render_notice(kind, "web", **data)
    assert isinstance(web, str)
    assert_web_safe(web)


def assert_slack_text_safe(text: str) -> None:
    leftover = SLACK_DATE.sub("", OUR_LINK.sub("", text))
    assert "<" not in leftover and ">" not in leftover, text
    assert not HIDDEN.search(text), text


def test_slack_mentions_only_for_well_formed_ids() -> None:
    message = render_notice(
        "escalated", "slack", mentions=["U012ABCDEF", "S0FIN", "<!here>", "u12", "U1|x"]
    )
    text = json.dumps(message)
    assert "<@U012ABCDEF>" in text and "<!subteam^S0FIN>" in text
    assert "&lt;!here&gt;" in text and "<@u12>" not in text and "U1|x" in text


def test_teams_mentions_go_on_the_activity() -> None:
    from cards.teams.render import teams_mention_activity

    activity = teams_mention_activity(
        [{"id": "29:1abc", "name": "Alice <b>"}, "not an id <>", {"id": "aad-guid-1"}]
    )
    assert activity["text"] == "<at>Alice b</at> <at>aad-guid-1</at>"
    assert [e["mentioned"]["id"] for e in activity["entities"]] == ["29:1abc", "aad-guid-1"]


def test_unsafe_urls_are_dropped() -> None:
    view = build_view(
        sample_request(), sample_run(), approval_url="javascript:alert(1)",
        run_url="https://x.example/a|<!channel>",
    )  # fmt: skip
    assert view.approval_url is None and view.run_url is None
    assert "javascript" not in json.dumps(render_slack_card(view))
    assert "javascript" not in json.dumps(render_teams_card(view))
