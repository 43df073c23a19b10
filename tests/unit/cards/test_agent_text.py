"""Text from agents cannot draw Signoff's own status lines, on any of the three renderers.

An agent chooses a step's summary (the card's title) and, through the run's input, its reason.
With a line break it could put "✅ Approved by alice" on a line of its own under a pending
card's title, where Signoff writes who decided.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from typing import Any

import pytest

from cards.notice_fields import confidence_fields, step_result_fields
from cards.notices import NoticeKind
from cards.render import render_notice
from cards.samples import APPROVAL_URL, RUN_URL, SAMPLE_NOW, sample_request, sample_run
from cards.slack.render import render_slack_card
from cards.teams.render import render_teams_card
from cards.text import agent_text
from cards.view import build_view
from cards.web.render import render_web_card
from engine.domain.timeline import minutes_text

FORGED = (
    "Refund 5 EUR\n✅ Approved by *alice*",
    "Refund 5 EUR\r\n\n  Taken over by alice. The run waits until they release it.",
    "Refund 5 EUR\u2028⛔ Denied by bob",
    "✅ Approved by alice",
    "> *Approved* by alice",
)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in re.split(r"[\n\u2028\u2029]", text)]


def _slack_texts(card: dict[str, Any]) -> list[str]:
    out = [card["text"]]
    for block in card["blocks"]:
        for part in [
            block.get("text"),
            *(block.get("fields") or []),
            *(block.get("elements") or []),
        ]:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def _teams_texts(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["text"]] if isinstance(node.get("text"), str) else []
        return own + [t for v in node.values() for t in _teams_texts(v)]
    if isinstance(node, list):
        return [t for v in node for t in _teams_texts(v)]
    return []


def _status_lines(texts: list[str]) -> list[str]:
    starts = (
        "✅",
        "⛔",
        "approved by",
        "denied by",
        "taken over by",
        "*approved",
        "&gt; *approved",
    )
    return [
        line
        for text in texts
        for line in _lines(text)
        if line.lower().lstrip("*_ ").startswith(starts)
    ]


@pytest.mark.parametrize("forged", FORGED)
def test_agent_text_cannot_draw_a_status_line(forged: str) -> None:
    base = sample_request("pending")
    # As the title and as the reason (a card shows text the two share once: both ways).
    for summary, reason in ((forged, "the ticket says so"), ("Refund order A-1", forged)):
        details = {**base.details, "summary": summary}
        request = dataclasses.replace(base, reason=reason, details=details)
        view = build_view(
            request, sample_run(), approval_url=APPROVAL_URL, run_url=RUN_URL, now=SAMPLE_NOW
        )
        assert view.reason
        assert "\n" not in view.title and "\n" not in view.reason

        slack = _status_lines(_slack_texts(render_slack_card(view)))
        teams = _status_lines(_teams_texts(render_teams_card(view)))
        page = html.unescape(
            re.sub(r"<[^>]+>", "\n", render_web_card(view, csrf_token=None, form_action=None))
        )
        web = _status_lines([page])
        assert (slack, teams, web) == ([], [], [])


def test_agent_text_keeps_ordinary_text_as_it_is() -> None:
    assert agent_text("Refund 129.90 EUR for order A-1042") == "Refund 129.90 EUR for order A-1042"
    assert agent_text("line one\n\nline two") == "line one line two"
    assert agent_text("✅ Approved by alice") == "“✅ Approved by alice”"


def test_durations_are_pluralised_on_every_platform() -> None:
    """One spelling of a duration (``engine.domain.timeline.minutes_text``), never "1 minutes"."""
    assert [minutes_text(n) for n in (0, 1, 2, 60, 61, 125)] == [
        "0 min",
        "1 min",
        "2 min",
        "1 h",
        "1 h 1 min",
        "2 h 5 min",
    ]
    for platform in ("slack", "teams", "web"):
        shown = json.dumps(
            render_notice(
                NoticeKind.ESCALATED,
                platform,
                mentions=[],
                title="Refund",
                waited_minutes=1,
                approval_url=None,
            ),
            ensure_ascii=False,
        )
        assert "has waited 1 min without" in shown and "1 minutes" not in shown, platform


def test_step_results_and_estimator_details_are_agent_text_too() -> None:
    fields = step_result_fields({"ok": True, "output": "done\n✅ Approved by alice"})
    assert fields["output_summary"] == "done ✅ Approved by alice"
    fields = step_result_fields({"ok": False, "error": "✅ Approved by alice"})
    assert fields["error"] == "“✅ Approved by alice”"
    fields = confidence_fields({"confidence": {"detail": "ok\n⛔ Denied by bob"}})
    assert fields["detail"] == "ok ⛔ Denied by bob"
