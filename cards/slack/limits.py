"""Block Kit's size limits, checked the way Slack checks them.

``check_blocks`` is public: the fake Slack Web API in ``tests/fakes`` rejects what it reports,
as Slack would (``invalid_blocks`` / ``msg_blocks_too_long``). ``slack_sdk.models`` validators
miss several of these, so they are checked here one by one.

Sources: Slack Block Kit reference, https://docs.slack.dev/reference/block-kit/blocks (section,
header, actions, context), .../block-elements/button-element and
.../composition-objects/text-object; the 12,000-character total is below the
``msg_blocks_too_long`` failures reported at about 13,200 characters
(https://github.com/slackapi/bolt-js/issues/2509).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SLACK_MAX_BLOCKS = 50
SLACK_MAX_SECTION_TEXT = 3000
SLACK_MAX_FIELDS = 10
SLACK_MAX_FIELD_TEXT = 2000
SLACK_MAX_HEADER_TEXT = 150
SLACK_MAX_ID = 255  # action_id and block_id
SLACK_MAX_BUTTON_TEXT = 75
SLACK_MAX_BUTTON_VALUE = 2000
SLACK_MAX_URL = 3000
SLACK_MAX_ACTIONS_ELEMENTS = 25
SLACK_MAX_CONTEXT_ELEMENTS = 10
SLACK_MAX_TEXT_OBJECT = 3000
SLACK_MAX_TOTAL_TEXT = 12_000
SLACK_MAX_MESSAGE_TEXT = 40_000  # chat.postMessage `text`; longer is truncated by Slack

Block = Mapping[str, Any]


def _text_of(obj: object) -> str | None:
    if isinstance(obj, Mapping) and isinstance(obj.get("text"), str):
        return str(obj["text"])
    return None


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.total_text = 0

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def text_object(self, where: str, obj: object, limit: int, *, plain: bool = False) -> None:
        if not isinstance(obj, Mapping) or obj.get("type") not in ("plain_text", "mrkdwn"):
            self.fail(where, "is not a plain_text or mrkdwn text object")
            return
        if plain and obj.get("type") != "plain_text":
            self.fail(where, "must be plain_text")
        text = _text_of(obj)
        if text is None or not text:
            self.fail(where, "text is empty (Slack needs at least 1 character)")
            return
        self.total_text += len(text)
        if len(text) > limit:
            self.fail(where, f"text is {len(text)} characters, limit {limit}")

    def ident(self, where: str, block: Mapping[str, Any], key: str) -> None:
        value = block.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > SLACK_MAX_ID):
            self.fail(where, f"{key} longer than {SLACK_MAX_ID} characters")

    def button(self, where: str, element: Mapping[str, Any]) -> None:
        self.ident(where, element, "action_id")
        self.text_object(f"{where}.text", element.get("text"), SLACK_MAX_BUTTON_TEXT, plain=True)
        value = element.get("value")
        too_long = isinstance(value, str) and len(value) > SLACK_MAX_BUTTON_VALUE
        if value is not None and (not isinstance(value, str) or too_long):
            self.fail(where, f"value longer than {SLACK_MAX_BUTTON_VALUE} characters")
        url = element.get("url")
        if url is not None and (not isinstance(url, str) or len(url) > SLACK_MAX_URL):
            self.fail(where, f"url longer than {SLACK_MAX_URL} characters")
        if element.get("style") not in (None, "primary", "danger"):
            self.fail(where, "style must be primary or danger")

    def element(self, where: str, element: object) -> None:
        if not isinstance(element, Mapping):
            self.fail(where, "is not an object")
        elif element.get("type") == "button":
            self.button(where, element)
        else:
            self.ident(where, element, "action_id")

    def block(self, where: str, block: object) -> None:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            self.fail(where, "is not a block object with a type")
            return
        self.ident(where, block, "block_id")
        kind = block["type"]
        if kind == "section":
            self.section(where, block)
        elif kind == "header":
            self.text_object(f"{where}.text", block.get("text"), SLACK_MAX_HEADER_TEXT, plain=True)
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, Sequence) or not elements:
                self.fail(where, "actions block needs at least one element")
                return
            if len(elements) > SLACK_MAX_ACTIONS_ELEMENTS:
                self.fail(where, f"{len(elements)} elements, limit {SLACK_MAX_ACTIONS_ELEMENTS}")
            for i, element in enumerate(elements):
                self.element(f"{where}.elements[{i}]", element)
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, Sequence) or not elements:
                self.fail(where, "context block needs at least one element")
                return
            if len(elements) > SLACK_MAX_CONTEXT_ELEMENTS:
                self.fail(where, f"{len(elements)} elements, limit {SLACK_MAX_CONTEXT_ELEMENTS}")
            for i, element in enumerate(elements):
                if isinstance(element, Mapping) and element.get("type") == "image":
                    continue
                self.text_object(f"{where}.elements[{i}]", element, SLACK_MAX_TEXT_OBJECT)

    def section(self, where: str, block: Mapping[str, Any]) -> None:
        text, fields = block.get("text"), block.get("fields")
        if text is None and not fields:
            self.fail(where, "section needs text or fields")
        if text is not None:
            self.text_object(f"{where}.text", text, SLACK_MAX_SECTION_TEXT)
        if fields is not None:
            if not isinstance(fields, Sequence) or len(fields) > SLACK_MAX_FIELDS:
                self.fail(where, f"more than {SLACK_MAX_FIELDS} fields")
            else:
                for i, field in enumerate(fields):
                    self.text_object(f"{where}.fields[{i}]", field, SLACK_MAX_FIELD_TEXT)
        accessory = block.get("accessory")
        if accessory is not None:
            self.element(f"{where}.accessory", accessory)


def check_blocks(blocks: object) -> list[str]:
    """Every Block Kit limit ``blocks`` breaks, as readable lines; ``[]`` when it fits."""
    checker = _Checker()
    if not isinstance(blocks, Sequence) or isinstance(blocks, str | bytes):
        return ["blocks: is not a list"]
    if len(blocks) > SLACK_MAX_BLOCKS:
        checker.fail("blocks", f"{len(blocks)} blocks, limit {SLACK_MAX_BLOCKS}")
    for i, block in enumerate(blocks):
        checker.block(f"blocks[{i}]", block)
    if checker.total_text > SLACK_MAX_TOTAL_TEXT:
        total = checker.total_text
        checker.fail("blocks", f"{total} characters of text, limit {SLACK_MAX_TOTAL_TEXT}")
    return checker.problems


def blocks_text_length(blocks: Sequence[Block]) -> int:
    """The characters of text in ``blocks``, as counted toward ``SLACK_MAX_TOTAL_TEXT``."""
    checker = _Checker()
    for i, block in enumerate(blocks):
        checker.block(f"blocks[{i}]", block)
    return checker.total_text


def check_message(message: Mapping[str, Any]) -> list[str]:
    """``check_blocks`` plus the message's fallback ``text``."""
    problems = check_blocks(message.get("blocks", []))
    text = message.get("text")
    if not isinstance(text, str) or not text:
        problems.append("text: a non-empty fallback text is required with blocks")
    elif len(text) > SLACK_MAX_MESSAGE_TEXT:
        problems.append(f"text: {len(text)} characters, limit {SLACK_MAX_MESSAGE_TEXT}")
    return problems
