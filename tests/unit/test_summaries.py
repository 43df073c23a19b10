"""A held call's one-line summary: a null shows nothing (never "None") and counts are in words
(``plural``), for the shipped mailer action and for any template."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.config import parse_config
from engine.domain.errors import StepError
from engine.domain.expressions import render_text
from engine.services.calls import approval_summary

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("to", "account", "line"),
    [
        (["a@example.com"], None, "Send email to 1 recipient"),
        (["a@example.com", "b@example.com"], None, "Send email to 2 recipients"),
        (["a@example.com"], "ops", "Send email to 1 recipient from ops"),
        ([], "ops", "Send email to 0 recipients from ops"),
    ],
)
def test_the_shipped_mailer_summary(to: list[str], account: str | None, line: str) -> None:
    cfg = parse_config((ROOT / "app.yaml").read_text(), {})
    spec = cfg.connectors["mailer"].actions["send"]
    assert approval_summary(spec, "mailer", {"to": to}, account, None) == line


@pytest.mark.parametrize("strict", [True, False])
def test_a_null_renders_as_nothing(strict: bool) -> None:
    context = {"account": None, "args": {"n": None}}
    assert render_text("Sent from {{ account }}.", context, strict=strict) == "Sent."
    # The same through jinja (a filter), not only the fast path for plain paths.
    assert render_text("[{{ args.n | default(None) }}]", context, strict=strict) == "[]"
    assert render_text("{{ args.n }}", {"args": {"n": 0}}, strict=strict) == "0"


@pytest.mark.parametrize(
    ("template", "line"),
    [
        ("{{ 1 | plural('recipient') }}", "1 recipient"),
        ("{{ 0 | plural('recipient') }}", "0 recipients"),
        ("{{ args.to | plural('recipient') }}", "3 recipients"),
        ("{{ args.to | length | plural('person', 'people') }}", "3 people"),
        ("{{ args.one | plural('person', 'people') }}", "1 person"),
    ],
)
def test_plural(template: str, line: str) -> None:
    context = {"args": {"to": ["a", "b", "c"], "one": {"k": 1}}}
    assert render_text(template, context, strict=True) == line


def test_plural_of_text_is_an_error_and_the_summary_falls_back() -> None:
    with pytest.raises(StepError):
        render_text("{{ 'abc' | plural('x') }}", {}, strict=True)
    cfg = parse_config((ROOT / "app.yaml").read_text(), {})
    spec = cfg.connectors["mailer"].actions["send"]
    line = approval_summary(spec, "mailer", {"to": "a@example.com"}, None, None)
    assert line == "mailer.send with 1 argument (to)"


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    ("template", "args", "line"),
    [
        # The lines issue 31 quotes, and what they read now.
        (
            "Send email to {{ args.to | plural('recipient') }}, subject {{ args.subject }}",
            {"to": ["a@example.com"], "subject": ""},
            "Send email to 1 recipient",
        ),
        (
            "Post {{ args.items | plural('item') }} to {{ args.channel }}",
            {"items": [], "channel": None},
            "Post 0 items",
        ),
        ("Refund {{ args.amount }} to {{ args.who }}", {"amount": "", "who": " "}, "Refund"),
        # What is there is said; an empty list or mapping says nothing either.
        ("Refund {{ args.amount }} to {{ args.who }}", {"amount": 5, "who": []}, "Refund 5"),
        ("Refund {{ args.amount }} to {{ args.who }}", {"amount": {}, "who": "bo"}, "Refund to bo"),
        (
            "Send {{ args.n }} files · from {{ args.who }} · to {{ args.to }}",
            {"n": 0, "who": None, "to": "ops"},
            "Send 0 files · to ops",
        ),
        ("Note: {{ args.text }}", {"text": None}, "Note"),
        ("Pay {{ args.amount }}{{ args.currency }}", {"amount": 12, "currency": None}, "Pay 12"),
        # Through jinja (a filter), not only the fast path for plain paths.
        ("Refund {{ args.a | abs }} to {{ args.b | upper }}", {"a": 1, "b": ""}, "Refund 1"),
    ],
)
def test_what_an_empty_value_would_have_said_is_left_out(
    template: str, args: dict[str, object], line: str, strict: bool
) -> None:
    assert render_text(template, {"args": args}, strict=strict) == line


def test_a_value_cannot_pass_for_empty() -> None:
    """The mark an empty value prints is taken out of values, so data cannot forge it."""
    context = {"args": {"who": "b\x00o", "n": None}}
    assert render_text("Pay {{ args.who }} {{ args.n }}", context) == "Pay bo"


def test_a_missing_value_still_fails_a_strict_render() -> None:
    with pytest.raises(StepError):
        render_text("Refund {{ args.nope | upper }}", {"args": {}}, strict=True)


def test_a_summary_left_empty_falls_back_to_the_generic_line() -> None:
    cfg = parse_config((ROOT / "app.yaml").read_text(), {})
    spec = cfg.connectors["mailer"].actions["send"]
    spec = dataclasses.replace(spec, summary="{{ args.subject }}")
    line = approval_summary(spec, "mailer", {"subject": None}, None, None)
    assert line == "mailer.send with 1 argument (subject)"
