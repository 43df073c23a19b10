"""Property: for arbitrary JSON arguments, every rendering is valid, within its platform's
limits, and shows an exact prefix of the canonical JSON (with the visible escapes undone),
followed by a truthful "truncated: N more characters" line when it is cut.

The strategies reach the nasty cases on purpose: strings of a megabyte, nesting 50 deep, and
every code point including lone surrogates.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from cardchecks import (
    assert_valid_html,
    assert_valid_slack,
    assert_valid_teams,
    omitted_after,
    slack_arguments,
    teams_arguments,
    web_arguments,
)
from hypothesis import HealthCheck, Phase, example, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisWarning

from cards.samples import STATES, sample_view
from cards.slack.render import render_slack_card
from cards.teams.render import render_teams_card
from cards.text import canonical_json
from cards.web.render import render_web_card

MEGABYTE = 1_000_000
HOSTILE = "<>&`{}[]()*_~|\\\"'@!#\n\t \u202e\u2066\u200b\u200d\ufeff\u00a0\u0301\u0338\ufe0f"

# Every code point, surrogates included (hypothesis leaves out Cs unless told otherwise).
any_char = st.characters(codec=None, exclude_categories=())
char = st.one_of(any_char, st.sampled_from(HOSTILE), st.characters(categories=["Cs"]))
text = st.text(char, max_size=40)
leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)


@st.composite
def huge_string(draw: st.DrawFn) -> str:
    """A string of about a megabyte, built by repeating a short drawn seed."""
    seed = draw(st.text(char, min_size=1, max_size=8))
    size = draw(st.sampled_from([MEGABYTE, MEGABYTE + 7, 40_000]))
    return (seed * (size // len(seed) + 1))[:size]


@st.composite
def deep(draw: st.DrawFn) -> Any:
    """Lists and objects nested ``depth`` levels around a leaf, 50 levels at most."""
    depth = draw(st.sampled_from([50, 49, 30, 10]))
    value: Any = draw(leaf)
    for _ in range(depth):
        if draw(st.booleans()):
            value = {draw(text): value}
        else:
            value = [value, *draw(st.lists(leaf, max_size=2))]
    return value


json_value = st.recursive(
    leaf,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(text, inner, max_size=5),
    max_leaves=25,
)


@st.composite
def arguments(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return {draw(text): draw(huge_string()), "next": draw(json_value)}
    if kind in (1, 2):
        return {"deep": draw(deep()), "other": draw(json_value)}
    return draw(st.dictionaries(text, json_value, max_size=6) | json_value)


def check_all_platforms(args: Any, state: str) -> None:
    view = sample_view(state, args)
    canonical = canonical_json(args)
    assert view.arguments_json == canonical

    slack = render_slack_card(view)
    assert_valid_slack(slack)
    shown, omitted = slack_arguments(slack)
    assert omitted_after(canonical, shown) == (omitted or 0)

    teams = render_teams_card(view)
    assert_valid_teams(teams)
    shown, omitted = teams_arguments(teams)
    assert omitted_after(canonical, shown) == (omitted or 0)

    web = render_web_card(view, csrf_token="t", form_action="/decide")
    assert_valid_html(web)
    assert omitted_after(canonical, web_arguments(web)) == 0  # the web shows all of it


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(args=arguments(), state=st.sampled_from(STATES))
@example(args={"blob": "\u202e<!channel>&`" * 100_000}, state="pending")
@example(args={"blob": "\U000e0041" * MEGABYTE}, state="granted")
def test_every_rendering_is_valid_and_exact(args: Any, state: str) -> None:
    check_all_platforms(args, state)


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max([0, *map(len, value), *map(_longest_string, value.values())])
    if isinstance(value, list):
        return max([0, *map(_longest_string, value)])
    return 0


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max([0, *map(_depth, value.values())])
    if isinstance(value, list):
        return 1 + max([0, *map(_depth, value)])
    return 0


def test_the_strategy_reaches_the_nasty_cases() -> None:
    """The composite strategies do produce megabyte strings, 50 levels and surrogates."""
    started = time.monotonic()
    quick = settings(
        max_examples=300,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    with warnings.catch_warnings():  # the found example is a megabyte: too large to repr
        warnings.simplefilter("ignore", HypothesisWarning)
        huge = find(arguments(), lambda a: _longest_string(a) >= MEGABYTE, settings=quick)
        nested = find(arguments(), lambda a: _depth(a) >= 50, settings=quick)
        surrogate = find(char, lambda c: "\ud800" <= c <= "\udfff", settings=quick)
    assert _longest_string(huge) >= MEGABYTE and _depth(nested) >= 50 and surrogate
    assert time.monotonic() - started < 30
