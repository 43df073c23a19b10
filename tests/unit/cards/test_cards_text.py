"""canonical_json, visible / undo_visible, escaping and atom-safe truncation."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cards.slack.templating import slack_code_edges
from cards.teams.limits import teams_cost
from cards.text import (
    ELLIPSIS,
    Flavor,
    atoms,
    canonical_json,
    escape_mrkdwn,
    excerpt_arguments,
    truncate,
    undo_visible,
    utf16_len,
    visible,
)


def test_canonical_json_is_sorted_indented_utf8() -> None:
    value = {"b": [1, {"d": None, "c": "é\u202e"}], "a": True}
    assert canonical_json(value) == (
        '{\n  "a": true,\n  "b": [\n    1,\n    {\n      "c": "é\u202e",\n      "d": null\n'
        "    }\n  ]\n}"
    )
    assert canonical_json(value) == json.dumps(
        value, sort_keys=True, indent=2, ensure_ascii=False, separators=(",", ": ")
    )


@pytest.mark.parametrize(
    ("char", "shown"),
    [
        ("\u202e", "\\u202e"),  # right-to-left override
        ("\u2066", "\\u2066"),  # left-to-right isolate
        ("\u061c", "\\u061c"),  # Arabic letter mark
        ("\u200b", "\\u200b"),  # zero-width space
        ("\u200d", "\\u200d"),  # zero-width joiner
        ("\u2060", "\\u2060"),  # word joiner
        ("\ufeff", "\\ufeff"),  # byte order mark
        ("\u00ad", "\\u00ad"),  # soft hyphen
        ("\u00a0", "\\u00a0"),  # no-break space looks like a space
        ("\u2028", "\\u2028"),  # line separator
        ("\u3164", "\\u3164"),  # Hangul filler
        ("\u2800", "\\u2800"),  # braille blank
        ("\x00", "\\u0000"),
        ("\x1b", "\\u001b"),
        ("\r", "\\u000d"),
        ("\x85", "\\u0085"),
        ("\ue000", "\\ue000"),  # private use
        ("\ud800", "\\ud800"),  # lone surrogate
        ("\U000e0041", "\\udb40\\udc41"),  # tag letter: a JSON surrogate pair
        ("\U000e0100", "\\udb40\\udd00"),  # variation selector supplement
    ],
)
def test_visible_escapes_hidden_characters(char: str, shown: str) -> None:
    assert visible(f"a{char}b") == f"a{shown}b"
    if ord(char) >= 0x20:  # below, JSON writes its own \u00XX, which undo_visible keeps
        assert undo_visible(visible(f"a{char}b")) == f"a{char}b"


def test_visible_keeps_what_reads_right() -> None:
    for text in (
        "plain text\n\twith tab",
        "e\u0301 café",
        "❤\ufe0f 😀 中文",
        "क्षि",
        "1\ufe0f\u20e3",
    ):
        assert visible(text) == text


def test_combining_marks_cannot_draw_over_punctuation_or_pile_up() -> None:
    assert visible('"\u0338x') == '"\\u0338x'  # a slash through the quote
    assert visible("\u0301") == "\\u0301"  # nothing to sit on
    assert visible("\u202e\u0301") == "\\u202e\\u0301"  # would sit on the escape
    assert visible("a" + "\u0301" * 6) == "a" + "\u0301" * 4 + "\\u0301" * 2


def test_undo_visible_keeps_json_escapes() -> None:
    text = canonical_json({"k": '\x01 \\u202e \u202e "q" \\'})
    assert undo_visible(visible(text)) == text
    assert "\\u0001" in undo_visible(visible(text))


def test_escape_mrkdwn() -> None:
    assert escape_mrkdwn("<!channel> & <@U1>") == "&lt;!channel&gt; &amp; &lt;@U1&gt;"


def test_flavors() -> None:
    raw = canonical_json({"x": "``` {{DATE(2017-02-14T06:08:39Z)}} <&>"})
    slack = "".join(s for _, s in atoms(raw, Flavor.MRKDWN_CODE, json_escapes=True))
    assert "\\u0060\\u0060\\u0060" in slack and "&lt;&amp;&gt;" in slack
    teams = "".join(s for _, s in atoms(raw, Flavor.CARD_TEXT, json_escapes=True))
    assert "\\u007b{DATE(" in teams and "<&>" in teams


def test_slack_code_edges() -> None:
    assert slack_code_edges("`a`") == "\\u0060a\\u0060"
    assert slack_code_edges("`") == "\\u0060"
    assert slack_code_edges("a`b") == "a`b"


_ATOM = re.compile(r"&(?:amp|lt|gt);|\\u[0-9a-f]{4}|[\s\S]")


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(codec=None)), limit=st.integers(1, 60))
def test_truncate_fits_and_never_splits_an_escape(text: str, limit: int) -> None:
    for flavor, cost in ((Flavor.MRKDWN, utf16_len), (Flavor.CARD_TEXT, teams_cost)):
        out = truncate(text, limit, flavor, cost)
        assert cost(out) <= limit
        whole = "".join(s for _, s in atoms(text, flavor))
        kept = out[: -len(ELLIPSIS)] if out.endswith(ELLIPSIS) and out != whole else out
        assert whole.startswith(kept)
        # The cut lands on an atom boundary: the kept part is a whole number of atoms.
        pieces = [s for _, s in atoms(text, flavor)]
        boundaries = {0}
        total = 0
        for piece in pieces:
            total += len(piece)
            boundaries.add(total)
        assert len(kept) in boundaries


@settings(max_examples=100, deadline=None)
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(st.characters(codec=None)),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=20,
    ),
    budget=st.integers(0, 400),
    chunk=st.integers(12, 120),  # 12: the longest atom, an escaped surrogate pair
)
def test_excerpt_is_an_exact_prefix_in_bounded_chunks(
    value: object, budget: int, chunk: int
) -> None:
    canonical = canonical_json(value)
    excerpt = excerpt_arguments(canonical, Flavor.MRKDWN_CODE, budget=budget, chunk_size=chunk)
    assert sum(utf16_len(c) for c in excerpt.chunks) <= budget
    assert all(utf16_len(c) <= chunk for c in excerpt.chunks)
    shown = excerpt.text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    undone = undo_visible(shown).encode("utf-16-le", "surrogatepass")
    whole = canonical.encode("utf-16-le", "surrogatepass")
    assert whole.startswith(undone)
    assert (excerpt.omitted == 0) == (undone == whole)
