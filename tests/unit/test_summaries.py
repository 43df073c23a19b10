"""A held call's one-line summary: a null shows nothing (never "None") and counts are in words
(``plural``), for the shipped mailer action and for any template."""

from __future__ import annotations

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
    assert render_text("from {{ account }}.", context, strict=strict) == "from ."
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
