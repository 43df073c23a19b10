"""Checks shared by the card tests: platform validity, and reading the arguments back out.

The Adaptive Card 1.5 schema beside this file is Microsoft's published schema
(http://adaptivecards.io/schemas/1.5.0/adaptive-card.json, MIT licence).
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jsonschema
from slack_sdk.models.blocks import Block

from cards.slack.limits import check_message
from cards.teams.limits import TEAMS_MAX_CARD_BYTES, teams_card_bytes
from cards.text import undo_visible

SCHEMA = json.loads((Path(__file__).parent / "adaptive-card-1.5.json").read_text("utf-8"))
VALIDATOR = jsonschema.Draft6Validator(SCHEMA)
TRUNCATED = re.compile(r"truncated: (\d+) more characters")


def assert_valid_slack(message: dict[str, Any]) -> None:
    """Within every Block Kit limit, and every block parses with slack_sdk unchanged."""
    json.dumps(message)  # serialisable as chat.postMessage sends it
    assert check_message(message) == []
    for block in message["blocks"]:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
        assert parsed.to_dict() == block


def assert_valid_teams(card: dict[str, Any]) -> None:
    """Valid against the Adaptive Card 1.5 schema and under the Teams size limit."""
    errors = [e.message[:300] for e in VALIDATOR.iter_errors(card)]
    assert errors == []
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.5"
    assert teams_card_bytes(card) <= TEAMS_MAX_CARD_BYTES


_ALLOWED_TAGS = {
    "section", "header", "p", "h2", "h3", "dl", "dt", "dd", "strong", "time", "span", "code",
    "pre", "a", "form", "input", "label", "textarea", "button", "div",
    "svg", "circle", "path",  # the state's icon, drawn rather than an emoji
}  # fmt: skip
_VOID = {"input"}


class _Structure(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            self.problems.append(f"unexpected <{tag}>")
        for name, value in attrs:
            if name.startswith("on") or (value or "").strip().lower().startswith("javascript:"):
                self.problems.append(f"unsafe attribute {name}={value!r}")
        if tag not in _VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack.pop() != tag:
            self.problems.append(f"unbalanced </{tag}>")

    def handle_comment(self, data: str) -> None:
        self.problems.append("comment in output")


def assert_valid_html(fragment: str) -> None:
    """Balanced, only the tags the templates write, no script-ish attributes."""
    parser = _Structure()
    parser.feed(fragment)
    parser.close()
    assert parser.problems == [] and parser.stack == [], (parser.problems, parser.stack)


def assert_valid_email(email: dict[str, str]) -> None:
    """One subject line, a text part, and an HTML part that loads and runs nothing."""
    assert email["subject"] and "\n" not in email["subject"] and "\r" not in email["subject"]
    assert email["text"].strip()
    lowered = email["html"].lower()
    for banned in ("<script", "<img", "<form", "<link", "<style", "src=", "javascript:"):
        assert banned not in lowered, banned


_SLACK_ENTITY = re.compile(r"&(amp|lt|gt);")


def unescape_slack(text: str) -> str:
    return _SLACK_ENTITY.sub(lambda m: {"amp": "&", "lt": "<", "gt": ">"}[m.group(1)], text)


def slack_arguments(message: dict[str, Any]) -> tuple[str, int | None]:
    """(shown arguments with Slack escaping undone, the truncation line's count)."""
    chunks: list[str] = []
    omitted = None
    for block in message["blocks"]:
        text = block.get("text", {}).get("text", "") if block["type"] == "section" else ""
        if text.startswith("```") and text.endswith("```") and len(text) >= 6:
            chunks.append(unescape_slack(text[3:-3]))
        if block["type"] == "context":
            found = TRUNCATED.search(block["elements"][0]["text"])
            if found:
                omitted = int(found.group(1))
    return "".join(chunks), omitted


def teams_arguments(card: dict[str, Any]) -> tuple[str, int | None]:
    shown, omitted, after_title = "", None, False
    for item in card["body"]:
        if item["type"] == "RichTextBlock":
            runs = item["inlines"]
            if after_title and runs[0].get("fontType") == "Monospace":
                shown = runs[0]["text"]
            after_title = runs[0]["text"] == "Arguments"
        else:
            after_title = False
            found = TRUNCATED.search(item.get("text", ""))
            if found:
                omitted = int(found.group(1))
    return shown, omitted


_PRE = re.compile(r'<pre class="signoff-card__arguments"><code>(.*?)</code></pre>', re.S)


def web_arguments(fragment: str) -> str:
    found = _PRE.search(fragment)
    return html.unescape(found.group(1)) if found else ""


def _u16(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def omitted_after(canonical: str, shown: str) -> int:
    """Check that ``shown`` (visible escapes included) is a prefix of ``canonical`` ending on a
    character boundary, and return how many characters of ``canonical`` it leaves out.

    Compared in UTF-16 code units: a lone high and low surrogate shown one after the other read
    back as the astral character they spell, exactly as JSON reads them."""
    undone = _u16(undo_visible(shown))
    whole = _u16(canonical)
    assert whole.startswith(undone), "shown arguments are not a prefix of the canonical JSON"
    units, covered = len(undone) // 2, 0
    count = 0
    while covered < units:
        covered += 2 if ord(canonical[count]) > 0xFFFF else 1
        count += 1
    assert covered == units, "the cut falls inside a surrogate pair"
    return len(canonical) - count


# Each card format's validity check, by channel (``cards.render.card_channels``): a new format
# without one fails the tests that go over every format.
VALID = {
    "email": assert_valid_email,
    "slack": assert_valid_slack,
    "teams": assert_valid_teams,
    "web": assert_valid_html,
}
