"""check_blocks reports each Block Kit limit (reused by the fake Slack server)."""

from __future__ import annotations

from typing import Any

import pytest

from cards.slack.limits import check_blocks, check_message
from cards.teams.limits import check_teams_card, teams_card_bytes


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def button(**over: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "Go"}} | over


def mrkdwn(text: str = "x") -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


@pytest.mark.parametrize(
    ("blocks", "fragment"),
    [
        ([{"type": "divider"}] * 51, "51 blocks, limit 50"),
        ([section("x" * 3001)], "3001 characters, limit 3000"),
        ([{"type": "section", "fields": [mrkdwn()] * 11}], "more than 10 fields"),
        ([{"type": "section", "fields": [mrkdwn("x" * 2001)]}], "limit 2000"),
        ([{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}], "limit 150"),
        ([{"type": "header", "text": mrkdwn()}], "must be plain_text"),
        ([{"type": "divider", "block_id": "b" * 256}], "block_id longer than 255"),
        ([{"type": "actions", "elements": [button(action_id="a" * 256)]}], "action_id longer"),
        ([{"type": "actions", "elements": [button(text={"type": "plain_text", "text": "x" * 76})]}],
         "limit 75"),
        ([{"type": "actions", "elements": [button(value="v" * 2001)]}], "value longer than 2000"),
        ([{"type": "actions", "elements": [button()] * 26}], "26 elements, limit 25"),
        ([{"type": "actions", "elements": [button(style="loud")]}], "style must be"),
        ([{"type": "context", "elements": [mrkdwn()] * 11}], "11 elements, limit 10"),
        ([section("")], "text is empty"),
        ([section("x" * 2999)] * 5, "14995 characters of text, limit 12000"),
        ([{"type": "section"}], "needs text or fields"),
        ([{"no": "type"}], "is not a block"),
        ("blocks", "is not a list"),
    ],
)  # fmt: skip
def test_each_limit_is_reported(blocks: Any, fragment: str) -> None:
    problems = check_blocks(blocks)
    assert any(fragment in p for p in problems), problems


def test_limits_at_the_edge_pass() -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "x" * 150}},
        section("x" * 3000),
        {"type": "section", "fields": [mrkdwn("y" * 200)] * 10},
        {"type": "actions", "block_id": "b" * 255, "elements": [
            button(action_id="a" * 255, value="v" * 2000,
                   text={"type": "plain_text", "text": "t" * 75})] * 25},
        {"type": "context", "elements": [mrkdwn()] * 10},
    ] + [{"type": "divider"}] * 45  # fmt: skip
    assert check_blocks(blocks) == []


def test_check_message_needs_fallback_text() -> None:
    assert check_message({"blocks": [section("x")]}) != []
    assert check_message({"text": "t", "blocks": [section("x")]}) == []
    assert check_message({"text": "t" * 40_001, "blocks": []}) != []


def test_teams_size_counts_the_strictest_encoding() -> None:
    card = {"type": "AdaptiveCard", "body": [{"type": "TextBlock", "text": "x" * 10}]}
    compact = '{"type":"AdaptiveCard","body":[{"type":"TextBlock","text":"xxxxxxxxxx"}]}'
    assert teams_card_bytes(card) == 2 * len(compact)  # UTF-16
    # Unescaped: an emoji is 4 bytes in UTF-8 and in UTF-16; a CJK character 3 in UTF-8.
    wide = {"text": "\U0001f600" * 100}
    assert teams_card_bytes(wide) == 2 * len('{"text":""}') + 4 * 100
    cjk = {"text": "中" * 100}
    assert teams_card_bytes(cjk) == len('{"text":""}') + 3 * 100
    assert check_teams_card({"text": "x" * 14_000}) != []
    assert check_teams_card(card) == []
